"""POST /api/v1/alternatives on the real app with tiny real bundles: the characters for one
position of a candidate keep every hard rule, come best first with the candidate's own among
them, repeats change together, the same list through a decode worker process, OpenAPI, and
bilingual 422s for bad input (never a 500)."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from data.rules import check
from serve.main import create_app
from serve.settings import Settings
from tests.serve.conftest import BAD_WORD

URL = "/api/v1/alternatives"


def first_candidate(client: TestClient, upper: str, **body: object) -> str:
    r = client.post("/api/v1/generate", json={"upper": upper, "n": 1, **body})
    assert r.status_code == 200, r.text
    return str(r.json()["candidates"][0]["text"])


@pytest.mark.parametrize("upper", ["绿水青山，千秋画卷", "天天向上", "书山有路勤为径"])
def test_alternatives_keep_every_rule_best_first_with_the_own_character(
    client: TestClient, upper: str
) -> None:
    lower = first_candidate(client, upper)
    for position in [i for i, ch in enumerate(upper) if ch != "，"]:
        r = client.post(URL, json={"upper": upper, "lower": lower, "position": position, "n": 5})
        assert r.status_code == 200, r.text
        body = r.json()
        assert (body["upper"], body["lower"], body["position"]) == (upper, lower, position)
        assert body["model_version"] == "test-a" and position in body["positions"]
        found = body["alternatives"]
        assert 5 <= len(found) <= 6  # five others, and the line's own
        assert [a["char"] for a in found if a["original"]] == [lower[position]]
        ranks = [a["rank_score"] for a in found]
        assert ranks == sorted(ranks, reverse=True)
        for a in found:
            assert all(a["text"][i] == a["char"] for i in body["positions"])
            report = check(upper, a["text"])
            assert report.hard_ok and report.tone_end is not False, a["text"]
            assert a["report"] == {**report.as_dict(), "hard_ok": True}
            assert len(a["tones"]) == len(upper)


def test_a_repeated_character_changes_with_its_copies(client: TestClient) -> None:
    upper = "天天向上"  # 天 at 0 and 1
    lower = first_candidate(client, upper)
    body = client.post(URL, json={"upper": upper, "lower": lower, "position": 1}).json()
    assert body["positions"] == [0, 1]
    assert all(a["text"][0] == a["text"][1] == a["char"] for a in body["alternatives"])


def test_locks_are_kept(client: TestClient) -> None:
    upper = "书山有路勤为径"
    lower = first_candidate(client, upper, locks="__金____")
    body = client.post(URL, json={"upper": upper, "lower": lower, "position": 0, "locks": "__金____"}).json()
    assert body["alternatives"] and all("金" not in a["text"][:2] for a in body["alternatives"])
    locked = client.post(
        URL, json={"upper": upper, "lower": lower, "position": 2, "locks": "__金____"}
    ).json()
    assert [a["char"] for a in locked["alternatives"]] == ["金"]


@pytest.mark.slow
def test_the_same_list_from_a_decode_worker_process(settings: Settings, client: TestClient) -> None:
    upper = "书山有路勤为径"
    lower = first_candidate(client, upper)
    ask = {"upper": upper, "lower": lower, "position": 3, "n": 8}
    here = client.post(URL, json=ask).json()
    with TestClient(create_app(settings.model_copy(update={"decode_processes": 1}))) as pooled:
        there = pooled.post(URL, json=ask)
        refused = pooled.post(URL, json={**ask, "lower": "书" + lower[1:]})  # 书 reuses the upper line's
    assert there.status_code == 200 and there.json() == here
    assert refused.status_code == 422 and " / " in refused.json()["detail"]  # ConstraintError crossed over


@pytest.mark.slow
@pytest.mark.parametrize("table", [True, False])
def test_listed_words_are_withheld(
    settings: Settings, blocked_bundle: Path, bad_bundle: Path, table: bool
) -> None:
    """These bundles' model wants 坏 then 蛋 at every position: after 坏 its best is 蛋, which
    would spell the listed 坏蛋 inside the word 山高水长. The search's table refuses it there
    (``blocked_bundle``), or the service's filter withholds the line and counts it (``bad_bundle``)."""
    bundle = blocked_bundle if table else bad_bundle
    with TestClient(create_app(settings.model_copy(update={"model_dir": bundle}))) as c:
        body = c.post(URL, json={"upper": "山高水长", "lower": "坏月风好", "position": 1, "n": 16}).json()
    assert len(body["alternatives"]) == 17 and all(BAD_WORD not in a["text"] for a in body["alternatives"])
    assert body["filtered"] == (0 if table else 1)


@pytest.mark.parametrize(
    ("body", "zh", "en"),
    [
        ({"upper": "春风得意", "lower": "秋月生", "position": 0}, "一样长", "same length"),
        ({"upper": "春风得意", "lower": "秋月生辉", "position": 4}, "位置", "position must be"),
        ({"upper": "绿水青山，千秋画卷", "lower": "红梅白雪，万里诗篇", "position": 4}, "标点", "mirrors"),
        ({"upper": "春风得意", "lower": "秋月生辉", "position": 0, "n": 17}, "最多", "At most 16"),
        ({"upper": "春风得意", "lower": "abcd", "position": 0}, "下联", "Latin letters"),
        ({"upper": "春风得意", "lower": "秋月生辉", "position": 0, "locks": "__"}, "锁定", "as long as"),
        ({"upper": "绿水青山，千秋画卷", "lower": "红梅白雪万里，诗篇", "position": 0}, "标点", "marks"),
        ({"upper": "春风得意", "lower": "春月生辉", "position": 2}, "没有合乎全部规则", "keeps every rule"),
    ],
)
def test_bad_input_is_a_bilingual_422(client: TestClient, body: dict[str, object], zh: str, en: str) -> None:
    r = client.post(URL, json=body)
    assert r.status_code == 422, r.text
    detail = r.json()["detail"]
    assert isinstance(detail, str) and " / " in detail and zh in detail and en in detail


@pytest.mark.parametrize(
    "body",
    [
        {"upper": "春风得意", "lower": "秋月生辉", "position": "0"},  # strict types
        {"upper": "春风得意", "lower": "秋月生辉", "position": -1},
        {"upper": "春风得意", "lower": "秋月生辉"},
        {"upper": "春风得意", "lower": "秋月生辉", "position": 0, "postion": 1},  # a misspelt field
    ],
)
def test_malformed_bodies_are_422_not_500(client: TestClient, body: dict[str, object]) -> None:
    r = client.post(URL, json=body)
    assert r.status_code == 422 and " / " in str(r.json()["detail"])


def test_in_openapi(client: TestClient) -> None:
    spec = client.get("/openapi.json").json()
    operation = spec["paths"][URL]["post"]
    assert {"200", "422", "503"} <= set(operation["responses"])
    assert "keeps every rule" in operation["description"]
    schema = spec["components"]["schemas"]["AlternativesResponse"]
    assert {"alternatives", "positions", "position", "model_version"} <= set(schema["properties"])
    assert URL in client.get("/docs/openapi-3.0.json").json()["paths"]


def test_a_long_lines_candidate_has_alternatives_up_to_the_models_length(client: TestClient) -> None:
    """A 长联 of 35 characters (answered segment by segment) is read whole for its alternatives;
    past the model's length (63 shipped, 39 here) they are refused with a reason, never a 500."""
    smith = "白塔街，黄铁匠，生红炉，烧黑炭，冒青烟，闪蓝光，淬紫铁，坐北朝南打东西"
    for upper, ok in [(smith, True), (f"{smith}，{smith}", False)]:
        lower = client.post("/api/v1/generate", json={"upper": upper, "n": 1}).json()["candidates"][0]["text"]
        r = client.post("/api/v1/alternatives", json={"upper": upper, "lower": lower, "position": 2, "n": 3})
        if ok:
            assert r.status_code == 200, r.text
            assert all(check(upper, a["text"]).hard_ok for a in r.json()["alternatives"])
        else:
            detail = r.json()["detail"]
            assert r.status_code == 422 and "at most" in detail and "最多" in detail, r.text
