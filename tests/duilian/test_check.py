"""The check of a couplet (duilian/check.py) and ``duilian check`` (duilian/check_cli.py): the
verdicts are data.rules', the word pairs read the pairing table, and the command prints the
report, or with --json the very object POST /api/v1/check answers; bad input exits 2."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from data.pairing import PairingTable
from data.paths import ROOT
from data.rules import check
from data.vocab import Vocab
from duilian.check import check_couplet, known_couplet, part_of_speech
from serve.main import create_app
from serve.settings import Settings
from tests.serve.conftest import PAIRS, build_bundle, wait_known

SCRIPT = Path(sys.executable).with_name("duilian")


def run(*args: str) -> subprocess.CompletedProcess[str]:
    if not SCRIPT.is_file():  # a stale environment: the test must not pass without the script
        pytest.fail(f"no console script {SCRIPT}: install the project again (pip install -e .)")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([SCRIPT, "check", *args], capture_output=True, text=True, env=env, timeout=300)


def test_the_verdicts_are_the_rules_report() -> None:
    for upper, lower in [*PAIRS, ("春风，得意", "春雨得，意"), ("天天向上", "好学好学"), ("山高", "水长流")]:
        found = check_couplet(upper, lower)
        report = check(upper, lower)
        assert found.report == report and found.hard_ok == report.hard_ok
        assert {r.name: r.kept for r in found.rules if r.kind == "hard"} == {
            name: getattr(report, name) for name in ("length", "punctuation", "repeats", "no_reuse")
        }


def test_word_pairs_read_the_pairing_table_and_jiebas_parts_of_speech() -> None:
    table = PairingTable.count([("天地", "日月")] * 50 + [("山水", "花鸟"), ("东西", "南北")] * 20)
    found = check_couplet("天地东西", "日月南北", pairing=table)
    assert [(w.upper, w.lower) for w in found.words] == [("天地", "日月"), ("东西", "南北")]
    assert found.words[0].pairing == round(table.line_score("天地", "日月"), 3) > 1.0
    assert (part_of_speech("天地"), part_of_speech("日月")) == ("n", "t")  # jieba's dictionary's tags
    assert [(w.upper_pos, w.lower_pos, w.pos_match) for w in found.words] == [
        ("n", "t", False),
        ("ns", "ns", True),
    ]
    assert part_of_speech("地东") is None and check_couplet("天地东西", "日月南北").words[0].pairing is None


def test_a_known_couplet_whatever_its_punctuation() -> None:
    known = known_couplet("绿水青山千秋画卷", "红梅白雪万里诗篇", ["红梅白雪，万里诗篇", "x"], True)
    assert known.couplet_known and known.upper_known and known.known_lower_lines[0] == "红梅白雪，万里诗篇"
    assert not known_couplet("绿水青山", "红梅白雪", ["白雪红梅"], True).couplet_known


@pytest.fixture(scope="module")
def known_bundle(tmp_path_factory: pytest.TempPathFactory, vocab: Vocab) -> Path:
    return build_bundle(
        tmp_path_factory.mktemp("models") / "known", vocab, seed=1, version="known", known=True
    )


def api_answer(bundle: Path, folder: Path, upper: str, lower: str) -> dict:
    """POST /api/v1/check's answer from the real app serving ``bundle``."""
    settings = Settings(
        model_dir=bundle,
        database_url=f"sqlite:///{folder / 'feedback.db'}",
        known_pairs=None,
        rate_limit_per_minute=0,
        decode_processes=0,
    )
    app = create_app(settings)
    with TestClient(app) as client:
        wait_known(app)
        answer: dict = client.post("/api/v1/check", json={"upper": upper, "lower": lower}).json()
    return answer


@pytest.mark.slow
def test_json_is_the_apis_very_object_and_plain_text_is_readable(known_bundle: Path, tmp_path: Path) -> None:
    upper, lower = "绿水青山，千秋画卷", "红梅白雪，万里诗篇"
    out = run(upper, lower, "--model", str(known_bundle), "--json")
    assert out.returncode == 0, out.stderr
    answer = api_answer(known_bundle, tmp_path, upper, lower)
    assert json.loads(out.stdout) == answer and answer["known"]["couplet_known"] is True
    text = run(upper, lower, "--model", str(known_bundle))
    assert text.returncode == 0, text.stderr
    assert "✓马蹄韵" in text.stdout and "合律" in text.stdout and "训练集中的对联" in text.stdout
    broken = run("春风，得意", "春雨得，意", "--model", str(known_bundle)).stdout
    assert "✗不重字（第1、3、5字）" in broken and "✗标点（第3、4字）" in broken


@pytest.mark.slow
def test_suggestions_are_the_apis_and_without_the_model_the_report_says_why(
    known_bundle: Path, tmp_path: Path
) -> None:
    upper, lower = "春风得意", "秋月生雨"  # 雨 oblique after 意: the tone end broken
    out = run(upper, lower, "--model", str(known_bundle), "--json")
    assert out.returncode == 0, out.stderr
    answer = api_answer(known_bundle, tmp_path, upper, lower)
    assert json.loads(out.stdout)["suggestions"] == answer["suggestions"]
    first = answer["suggestions"]["items"][0]
    assert first["position"] == 3 and "tone_end" in first["weakness"]
    assert check(upper, first["replacements"][0]["text"]).tone_end is True
    text = run(upper, lower, "--model", str(known_bundle)).stdout
    assert "建议" in text and "第4字「雨」（尾字平仄" in text
    assert f"→ {first['replacements'][0]['char']}  补尾字平仄" in text
    bare = run(upper, lower, "--model", str(known_bundle), "--json", "--no-suggest")
    assert bare.returncode == 0, bare.stderr
    said = json.loads(bare.stdout)["suggestions"]
    assert said["searched"] is False and said["items"] == [] and "No model" in said["reason"]
    assert "未载入模型" in run(upper, lower, "--model", str(known_bundle), "--no-suggest").stdout


@pytest.mark.slow
def test_known_lines_are_screened_by_the_bundles_word_list_as_the_site_screens_them(
    tmp_path_factory: pytest.TempPathFactory, vocab: Vocab, tmp_path: Path
) -> None:
    upper, lower = PAIRS[0]  # 春风得意 / 秋月生辉, its lower line holding the listed word
    bundle = build_bundle(
        tmp_path_factory.mktemp("models") / "words", vocab, seed=1, version="words", known=True,
        sensitive=["生辉"],
    )  # fmt: skip
    out = run(upper, lower, "--model", str(bundle), "--json")
    assert out.returncode == 0, out.stderr
    answer = api_answer(bundle, tmp_path, upper, lower)
    assert json.loads(out.stdout) == answer
    assert answer["known"] == {"upper_known": True, "couplet_known": True, "known_lower_lines": []}


@pytest.mark.parametrize(
    "args",
    [
        ("春风", "abc"),
        ("", "秋月"),
        ("春风", "秋月", "--tone-mode", "ancient"),
        ("春风",),
        ("春风", "秋月", "--model", "/nonexistent"),
    ],
)
def test_bad_input_is_refused_in_both_languages_with_status_2(args: tuple[str, ...]) -> None:
    out = run(*args)
    assert out.returncode == 2 and out.stdout == ""
    assert " / " in out.stderr and "Traceback" not in out.stderr


def test_parts_of_speech_are_jiebas_own_read_by_first_character() -> None:
    import jieba.posseg

    table = jieba.posseg.dt.word_tag_tab  # (what jieba.posseg reads from the same dictionary)
    words = sorted(table)[::150]
    assert len(words) > 2000 and [part_of_speech(w) for w in words] == [table[w] for w in words]
