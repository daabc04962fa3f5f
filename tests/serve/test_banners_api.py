"""横批 in the API: under every candidate of /generate, and GET /api/v1/banners, on a real tiny model
with a 横批 table built from hand-written pairs; and the table the shipped bundle carries."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient

from data.banners import BANNERS_FILE, BannerTable, build_banners
from data.paths import corpus_dir, default_model_dir
from data.sensitive import ALLOW_LIST, SensitiveFilter, read_words
from data.text import is_han
from data.tones import line_tones, mark
from duilian import service
from serve.main import create_app
from serve.settings import Settings
from tests.data.test_banners import FIXTURE_PAIRS, SMALL, THEMES
from tests.serve.conftest import wait_known


@pytest.fixture(scope="module")
def banners_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    table = build_banners(FIXTURE_PAIRS, SensitiveFilter(["坏蛋"]), SMALL)
    return table.save(tmp_path_factory.mktemp("banners") / BANNERS_FILE)


@pytest.fixture
def with_table(settings: Settings, banners_file: Path) -> Iterator[TestClient]:
    app = create_app(settings.model_copy(update={"banners": banners_file}))
    with TestClient(app) as c:
        wait_known(app)
        yield c


def test_the_table_is_loaded_when_the_server_starts_not_in_a_request(
    settings: Settings, banners_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    read: list[Path] = []
    load = service.load_banner_table

    def counted(path: Path, clean: Any) -> Any:
        read.append(path)
        return load(path, clean)

    monkeypatch.setattr(service, "load_banner_table", counted)
    app = create_app(settings.model_copy(update={"banners": banners_file}))
    with TestClient(app) as c:
        assert read == [banners_file]  # before any request
        table = app.state.service.model.banner_table()
        assert table is not None and read == [banners_file]
        r = c.post("/api/v1/generate", json={"upper": "春风得意", "n": 2})
        assert r.status_code == 200 and all(cand["banners"] for cand in r.json()["candidates"])
        assert app.state.service.model.banner_table() is table and read == [banners_file]  # read once


def check_banner(banner: dict, mode: str = "modern") -> None:
    text = banner["text"]
    assert len(text) == 4 and all(is_han(ch) for ch in text)
    assert banner["tones"] == [mark(t) for t in line_tones(text, mode)]
    assert isinstance(banner["score"], float)


def test_every_candidate_has_banners(with_table: TestClient) -> None:
    r = with_table.post("/api/v1/generate", json={"upper": "春风得意", "n": 3, "tone_mode": "classical"})
    assert r.status_code == 200, r.text
    candidates = r.json()["candidates"]
    assert candidates
    for cand in candidates:
        assert 1 <= len(cand["banners"]) <= 5
        for banner in cand["banners"]:
            check_banner(banner, "classical")
        scores = [b["score"] for b in cand["banners"]]
        assert scores == sorted(scores, reverse=True)


def test_banners_endpoint_ranks_by_theme(with_table: TestClient) -> None:
    r = with_table.get("/api/v1/banners", params={"upper": "红梅报喜", "lower": "绿柳迎新"})
    assert r.status_code == 200, r.text
    body = r.json()
    assert (body["upper"], body["lower"]) == ("红梅报喜", "绿柳迎新")
    assert len(body["banners"]) == 5
    for banner in body["banners"]:
        check_banner(banner)
    assert all(b["text"] in THEMES["spring"] for b in body["banners"][:3])
    r = with_table.get("/api/v1/banners", params={"upper": "读经明理", "lower": "勤能补拙", "n": 2})
    assert [b["text"] in THEMES["study"] for b in r.json()["banners"]] == [True, True]


@pytest.mark.parametrize(
    ("params", "says"),
    [
        ({"upper": "红梅报喜", "lower": "绿柳迎新春"}, "same length"),
        ({"upper": "红梅报喜", "lower": "green"}, "Latin"),
        ({"upper": "红梅报喜"}, "lower"),
        ({"upper": "红梅报喜", "lower": "绿柳迎新", "n": 6}, "n"),
        ({"upper": "红梅报喜", "lower": "绿柳迎新", "tone_mode": "ancient"}, "tone_mode"),
    ],
)
def test_banners_endpoint_refuses_bad_input(with_table: TestClient, params: dict, says: str) -> None:
    r = with_table.get("/api/v1/banners", params=params)
    assert r.status_code == 422, r.text
    zh, en = r.json()["detail"].split(" / ", 1)
    assert says in en and any(is_han(ch) for ch in zh)


def test_no_table_no_banners(settings: Settings, tmp_path: Path) -> None:
    app = create_app(settings.model_copy(update={"banners": tmp_path / "missing.npz"}))
    with TestClient(app) as c:
        r = c.get("/api/v1/banners", params={"upper": "红梅报喜", "lower": "绿柳迎新"})
        assert r.status_code == 404 and "横批" in r.json()["detail"] and " / " in r.json()["detail"]
        body = c.post("/api/v1/generate", json={"upper": "春风得意", "n": 2}).json()
        assert all(cand["banners"] == [] for cand in body["candidates"])


def test_banners_in_openapi(with_table: TestClient) -> None:
    spec = with_table.get("/openapi.json").json()
    assert "/api/v1/banners" in spec["paths"]
    assert "banners" in spec["components"]["schemas"]["Candidate"]["properties"]
    assert set(spec["components"]["schemas"]["Banner"]["properties"]) == {"text", "tones", "score"}


# The shipped bundle's table (models/default/banners.npz, built by python -m data.build_banners)

SHIPPED = default_model_dir() / BANNERS_FILE


@pytest.mark.skipif(not SHIPPED.is_file(), reason="the shipped bundle has no banners.npz")
def test_shipped_table_is_small_and_fits_themes() -> None:
    assert SHIPPED.stat().st_size < 2_000_000
    table = BannerTable.load(SHIPPED)
    assert len(table.phrases) > 5000 and {"万象更新", "国泰民安", "春回大地"} <= set(table.phrases)
    ranked = [p for p, _ in table.rank("爆竹声声辞旧岁", "梅花点点迎新春")]
    assert len(ranked) == 5 and sum("春" in p or "新" in p or "岁" in p for p in ranked) >= 3
    ranked = [p for p, _ in table.rank("白发渔樵江渚上", "青山依旧夕阳红")]
    assert sum(any(ch in p for ch in "江山水青") for p in ranked) >= 3
    assert "学海无涯" not in [p for p, _ in table.rank("书山有路勤为径", "学海无涯苦作舟")]


@pytest.mark.corpus
@pytest.mark.skipif(
    not (corpus_dir() / "badwords.txt").is_file() or not SHIPPED.is_file(), reason="needs the corpora"
)
def test_shipped_phrases_have_no_sensitive_word() -> None:
    allow = read_words(ALLOW_LIST) if ALLOW_LIST.is_file() else []
    words = SensitiveFilter(read_words(corpus_dir() / "badwords.txt"), allow)
    phrases = BannerTable.load(SHIPPED).phrases
    assert [p for p in phrases if not words.is_clean(p)] == []
    assert np.unique(phrases).size == len(phrases)
