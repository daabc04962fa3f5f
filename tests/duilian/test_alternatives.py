"""The in-process service's alternatives: input checks (bilingual) and the answer, whose JSON
form is the REST API's body field for field."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from duilian.engine import Engine
from duilian.inputs import InputError, make_alternatives_query, make_query
from duilian.service import LoadedModel
from serve.main import create_app
from serve.settings import Settings


def test_an_alternatives_query_is_normalised_and_checked() -> None:
    q = make_alternatives_query(" 春风得意 ", "秋月 生辉", 2, 3, locks="＿＿＿＿")
    assert (q.upper, q.lower, q.position, q.n, q.locks) == ("春风得意", "秋月生辉", 2, 3, None)
    for args, zh, en in [
        (("春风得意", "秋月生辉", 4), "位置", "The position must be 0 to 3"),
        (("春风，得意", "秋月，生辉", 2), "标点", "mirrors the upper line's mark"),
        (("春风得意", "秋月生", 0), "一样长", "same length"),
        (("春风得意", "秋月生辉", 0, 0), "至少", "at least one"),
    ]:
        with pytest.raises(InputError) as caught:
            make_alternatives_query(*args)  # type: ignore[arg-type]
        assert zh in caught.value.zh and en in caught.value.en


def test_the_answer_is_the_apis_body(bundle_a: Path, tmp_path: Path) -> None:
    settings = Settings(model_dir=bundle_a, database_url=f"sqlite:///{tmp_path / 'f.db'}", decode_processes=0)
    model = LoadedModel.load(
        bundle_a, engine=Engine(settings.int8, settings.runtime, settings.graph_cache)
    )  # as the site decodes
    lower = model.answer(make_query("书山有路勤为径", 1)).candidates[0].text
    answer = model.alternatives(make_alternatives_query("书山有路勤为径", lower, 4, 4))
    assert len(answer.alternatives) == 5 and sum(a.original for a in answer.alternatives) == 1
    with TestClient(create_app(settings)) as c:
        body = c.post(
            "/api/v1/alternatives", json={"upper": "书山有路勤为径", "lower": lower, "position": 4, "n": 4}
        ).json()
    assert body == answer.as_json()
