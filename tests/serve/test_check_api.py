"""POST /api/v1/check (issue 42): a couplet a person wrote, checked rule by rule and clause by clause,
on the site's tiny real bundle (and one with known pairs and a pairing table); bad input a
bilingual 422; the OpenAPI document describes the answer."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from data.rules import HARD_RULES, check
from data.tones import line_tones, mark
from data.vocab import Vocab
from model.store.bundle import load_bundle
from serve.main import create_app
from serve.settings import Settings
from tests.serve.conftest import PAIRS, build_bundle, wait_known

URL = "/api/v1/check"


@pytest.fixture(scope="module")
def known_bundle(tmp_path_factory: pytest.TempPathFactory, vocab: Vocab) -> Path:
    """A bundle that carries its training pairs' lower lines and their pairing table."""
    return build_bundle(
        tmp_path_factory.mktemp("models") / "known", vocab, seed=1, version="known", known=True
    )


@pytest.fixture
def known_client(settings: Settings, known_bundle: Path) -> Iterator[TestClient]:
    app = create_app(settings.model_copy(update={"model_dir": known_bundle, "known_pairs": None}))
    with TestClient(app) as c:
        wait_known(app)
        yield c


def rule(body: dict, name: str) -> dict:
    return next(r for r in body["rules"] if r["name"] == name)


def test_a_well_made_couplet_keeps_every_hard_rule(client: TestClient) -> None:
    r = client.post(URL, json={"upper": "书山有路勤为径", "lower": "学海无涯苦作舟"})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["hard_ok"] is True and body["report"] == check("书山有路勤为径", "学海无涯苦作舟").as_dict()
    assert [x["name"] for x in body["rules"] if x["kind"] == "hard"] == list(HARD_RULES)
    assert all(x["kept"] and not x["positions"] for x in body["rules"] if x["kind"] == "hard")
    assert body["upper_tones"] == [mark(t) for t in line_tones("书山有路勤为径", "modern")]
    assert body["lower_tones"][-1] == "平" and rule(body, "tone_end")["kept"] is True
    assert "".join(w["upper"] for w in body["words"]) == "书山有路勤为径"
    assert "".join(w["lower"] for w in body["words"]) == "学海无涯苦作舟"
    assert rule(body, "horse_hoof")["kept"] is None and len(body["clauses"]) == 1


def test_each_broken_rule_says_where(client: TestClient) -> None:
    body = client.post(URL, json={"upper": "春风，得意", "lower": "春雨得，意"}).json()
    assert body["hard_ok"] is False
    assert rule(body, "punctuation") == {**rule(body, "punctuation"), "kept": False, "positions": [2, 3]}
    assert rule(body, "no_reuse")["positions"] == [0, 2, 4]
    assert rule(body, "no_reuse")["clauses"] == [0, 1]
    assert "no_reuse" in body["clauses"][0]["broken"]


def test_lines_of_unequal_length_are_checked_and_the_clause_named(client: TestClient) -> None:
    body = client.post(URL, json={"upper": "绿水青山，千秋画卷", "lower": "红梅白雪，万里诗"}).json()
    assert body["hard_ok"] is False and rule(body, "length")["kept"] is False
    assert rule(body, "length")["clauses"] == [1] and body["clauses"][1]["length_ok"] is False
    assert body["words"] == []


def test_horse_hoof_clause_by_clause(client: TestClient) -> None:
    kept = client.post(URL, json={"upper": "花好月圆，春满乾坤，万家灯火映天地",
                                  "lower": "风调雨顺，福临门第，一城喜气贯神州"}).json()  # fmt: skip
    assert rule(kept, "horse_hoof")["kept"] is True and kept["report"]["horse_hoof"] is True
    assert [c["hoof_wanted"] for c in kept["clauses"]] == [["平", "仄"], ["平", "仄"], ["仄", "平"]]
    broken = client.post(URL, json={"upper": "花好月圆，春满乾坤，万家灯火映天地",
                                    "lower": "人寿年丰，福临门第，一城喜气贯神州"}).json()  # fmt: skip
    assert broken["hard_ok"] is True and rule(broken, "horse_hoof") | {"share": None} == {
        "name": "horse_hoof", "label": "马蹄韵", "kind": "search", "kept": False, "positions": [3],
        "clauses": [0], "share": None,
    }  # fmt: skip
    assert [c["hoof_kept"] for c in broken["clauses"]] == [False, True, True]


def test_tone_modes_change_the_tones(client: TestClient) -> None:
    modern = client.post(URL, json={"upper": "月落乌啼", "lower": "江枫渔火"}).json()
    classical = client.post(
        URL, json={"upper": "月落乌啼", "lower": "江枫渔火", "tone_mode": "classical"}
    ).json()
    assert classical["tone_mode"] == "classical"
    assert classical["upper_tones"] == [mark(t) for t in line_tones("月落乌啼", "classical")]
    assert modern["upper_tones"] == [mark(t) for t in line_tones("月落乌啼", "modern")]


def test_a_known_couplet_and_its_word_pairs_scores(known_client: TestClient, known_bundle: Path) -> None:
    upper, lower = PAIRS[0]
    body = known_client.post(URL, json={"upper": upper, "lower": lower}).json()
    assert body["known"] == {"upper_known": True, "couplet_known": True, "known_lower_lines": [lower]}
    table = load_bundle(known_bundle).pairing
    assert table is not None  # (ten pairs: every score under the table's floor, so 0)
    assert [w["pairing"] for w in body["words"]] == [
        round(table.line_score(w["upper"], w["lower"]), 3) for w in body["words"]
    ]
    other = known_client.post(URL, json={"upper": upper, "lower": "夏雨生凉"}).json()
    assert other["known"]["upper_known"] and not other["known"]["couplet_known"]
    unknown = known_client.post(URL, json={"upper": "东西南北", "lower": "日夜晴雨"}).json()
    assert unknown["known"] == {"upper_known": False, "couplet_known": False, "known_lower_lines": []}


@pytest.mark.parametrize(
    "payload",
    [
        {"upper": "", "lower": "秋月"},
        {"upper": "春风", "lower": "abc"},
        {"upper": "春风", "lower": "<b>秋月</b>"},
        {"upper": "春风" * 60, "lower": "秋月"},
        {"upper": "春风", "lower": "秋月", "tone_mode": "ancient"},
        {"upper": "春风", "lower": "秋月", "mode": "modern"},
        {"upper": "春风"},
        {"upper": 5, "lower": "秋月"},
        {"upper": "春风", "lower": "秋月", "suggest": "yes"},
    ],
)
def test_bad_input_is_a_bilingual_422(client: TestClient, payload: dict) -> None:
    r = client.post(URL, json=payload)
    assert r.status_code == 422, r.text
    detail = r.json()["detail"]
    assert isinstance(detail, str) and " / " in detail


def test_the_openapi_document_describes_the_answer(client: TestClient) -> None:
    spec = client.get("/openapi.json").json()
    op = spec["paths"][URL]["post"]
    ref = op["responses"]["200"]["content"]["application/json"]["schema"]["$ref"]
    schemas = spec["components"]["schemas"]
    answer = schemas[ref.rsplit("/", 1)[1]]
    assert {"hard_ok", "rules", "clauses", "upper_tones", "words", "known"} <= set(answer["properties"])
    assert all(p.get("description") for p in answer["properties"].values())
    assert "horse_hoof" in schemas["RuleReport"]["properties"]
    assert "422" in op["responses"]
    assert {"searched", "reason", "items"} <= set(schemas["Suggestions"]["properties"])
    assert {"position", "current", "weakness", "replacements", "note"} <= set(
        schemas["Suggestion"]["properties"]
    )
    assert all(p.get("description") for p in schemas["Replacement"]["properties"].values())


def test_suggestions_mend_a_reused_character_and_can_be_left_out(client: TestClient) -> None:
    upper, lower = "花开富贵", "竹报富安"  # 富 is the upper line's
    body = client.post(URL, json={"upper": upper, "lower": lower}).json()
    s = body["suggestions"]
    assert s["searched"] is True and s["reason"] is None
    first = s["items"][0]
    assert first["position"] == 2 and first["current"] == "富" and "no_reuse" in first["weakness"]
    best = first["replacements"][0]
    assert "no_reuse" in best["mends"] and check(upper, best["text"]).no_reuse is True
    assert best["text"] == lower[:2] + best["char"] + lower[3:]
    alone = client.post(URL, json={"upper": upper, "lower": lower, "suggest": False}).json()["suggestions"]
    assert alone["searched"] is False and alone["items"] == [] and "suggest: false" in alone["reason"]
    unequal = client.post(URL, json={"upper": upper, "lower": "竹报平安好"}).json()["suggestions"]
    assert unequal["searched"] is False and "mirrored" in unequal["reason"]
