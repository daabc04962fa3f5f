"""The ``duilian`` console script, run as a person runs it (the installed script, in its own
process, on the shipped model): the same candidates as the site's POST /api/v1/generate (the
real app on a real uvicorn server, which the command also asks itself with --server), and bad
input told in Chinese and English, never a trace."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from crawler.localredis import free_port
from data.paths import ROOT, default_model_dir
from model.decoding.options import SERVE_INT8, SERVE_RUNTIME
from serve.main import create_app
from serve.settings import Settings
from tests.serve.conftest import LiveServer

SCRIPT = Path(sys.executable).with_name("duilian")


@pytest.fixture(scope="module")
def script() -> Path:
    if not SCRIPT.is_file():  # a stale environment: the test must not pass without the script
        pytest.fail(f"no console script {SCRIPT}: install the project again (make setup, pip install -e .)")
    return SCRIPT


@pytest.fixture(scope="module")
def graphs(graph_cache: Path) -> Path:
    """The run's graph cache (tests/conftest.py), named on the command line: the site in this
    process and the command lines read the shipped model's graphs that the first one exported."""
    return graph_cache


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """The real app on the shipped model as `make serve` runs it, on a real uvicorn server,
    but decoding in its own process (the same LoadedModel as its workers hold) and without a
    corpus file of known pairs (the bundle's own, as the command line shows)."""
    settings = Settings(
        model_dir=default_model_dir(),
        database_url=f"sqlite:///{tmp_path_factory.mktemp('db') / 'f.db'}",
        known_pairs=None,
        banners=None,
        sensitive_words=None,
        int8=SERVE_INT8,
        runtime=SERVE_RUNTIME,
        decode_processes=0,
        rate_limit_per_minute=0,
    )
    with LiveServer(create_app(settings), start_timeout=600) as server:  # the first ONNX export
        yield server


def run(
    script: Path, *args: str, stdin: str = "", graphs: Path | None = None
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cache = ["--graph-cache", str(graphs)] if graphs is not None and args[:1] == ("generate",) else []
    return subprocess.run(
        [str(script), *args, *cache], input=stdin, capture_output=True, text=True, env=env, timeout=300
    )


def site_answer(site: LiveServer, body: dict[str, Any]) -> dict[str, Any]:
    response = httpx.post(f"{site.url}/api/v1/generate", json=body, timeout=300)
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


UPPERS = ["春风得意马蹄疾", "山高水长", "一帆风顺年年好"]


@pytest.mark.slow
def test_lines_from_stdin_get_the_sites_answers(script: Path, site: LiveServer, graphs: Path) -> None:
    done = run(script, "generate", "--json", "-n", "4", stdin="\n".join(UPPERS) + "\n\n", graphs=graphs)
    assert done.returncode == 0, done.stderr
    got = [json.loads(line) for line in done.stdout.splitlines()]
    want = [site_answer(site, {"upper": u, "n": 4}) for u in UPPERS]
    assert got == want  # every field: candidates, scores, tones, reports, 横批, flags
    assert all(len(a["candidates"]) == 4 for a in got)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("upper", "options", "body"),
    [
        ("春风得意马蹄疾", ["--locks", "__秋____"], {"locks": "__秋____"}),
        ("山高水长", ["--head", "月", "-n", "3"], {"required_first": "月", "n": 3}),
        (
            "书山有路勤为径",
            ["--embed", "海", "--tone-mode", "lenient"],
            {"required_chars": "海", "tone_mode": "lenient"},
        ),
        ("春风得意马蹄疾", ["--fast", "--diverse"], {"fast": True, "diverse": True}),
    ],
    ids=["locks", "藏头", "嵌字", "fast, diverse"],
)
def test_constraints_give_the_sites_answer(
    script: Path, site: LiveServer, graphs: Path, upper: str, options: list[str], body: dict[str, Any]
) -> None:
    done = run(script, "generate", upper, "--json", *options, graphs=graphs)
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout)
    assert got == site_answer(site, {"upper": upper, **body})
    if "locks" in body:
        assert all(c["text"][2] == "秋" for c in got["candidates"])
    if "required_first" in body:
        assert all(c["text"][0] == "月" for c in got["candidates"])


@pytest.mark.slow
def test_plain_output_shows_tones_and_verdicts(script: Path, site: LiveServer, graphs: Path) -> None:
    done = run(script, "generate", "山高水长", "-n", "2", graphs=graphs)
    assert done.returncode == 0, done.stderr
    want = site_answer(site, {"upper": "山高水长", "n": 2})
    lines = done.stdout.splitlines()
    assert lines[0] == "上联  山高水长"
    assert "".join(want["upper_tones"]) in lines[1]
    for i, c in enumerate(want["candidates"], 1):
        row = next(n for n, line in enumerate(lines) if line.startswith(f"{i:>3}.  {c['text']} "))
        assert f"得分 {c['rank_score']:.3f}" in lines[row]
        assert lines[row + 1].split()[0] == "".join(c["tones"])
        assert ("✓尾字平仄" if c["report"]["tone_end"] else "✗尾字平仄") in lines[row + 1]


def bilingual_refusal(done: subprocess.CompletedProcess[str], zh: str, en: str) -> None:
    assert done.returncode == 2, done.stdout
    assert zh in done.stderr and en in done.stderr, done.stderr
    assert "Traceback" not in done.stderr + done.stdout


def test_a_bad_line_is_refused_in_both_languages(script: Path) -> None:
    done = run(script, "generate", "hello")
    bilingual_refusal(done, "不能有拉丁字母", "must not contain Latin letters")
    assert done.stdout == ""


@pytest.mark.slow
def test_bad_options_are_refused_in_both_languages(script: Path) -> None:
    bilingual_refusal(run(script, "generate", "春风得意", "--locks", "__秋"), "锁定模式", "lock pattern")
    bilingual_refusal(
        run(script, "generate", "春风得意", "--head", "秋月"), "藏头只能是一个字", "one character"
    )
    bilingual_refusal(run(script, "generate", "春风得意", "-n", "11"), "参数有误", "bad arguments")
    bilingual_refusal(
        run(script, "generate", "春风得意", "--model", "/nonexistent"), "不是模型目录", "no model bundle"
    )
    bilingual_refusal(run(script, "frobnicate"), "参数有误", "invalid choice")


@pytest.mark.slow
def test_an_impossible_constraint_is_refused_and_the_other_lines_answered(script: Path, graphs: Path) -> None:
    # 春 stands in every upper line: no lower line may reuse it, so 藏头 春 cannot be kept
    done = run(script, "generate", "--head", "春", "-n", "1", stdin="春风得意\nabc\n", graphs=graphs)
    bilingual_refusal(done, "藏头", "required first")
    assert "abc" in done.stderr and "拉丁字母" in done.stderr
    done = run(
        script, "generate", "--head", "月", "-n", "1", stdin="春风得意\nabc\n山高水长\n", graphs=graphs
    )
    bilingual_refusal(done, "拉丁字母", "Latin letters")
    answered = [line for line in done.stdout.splitlines() if line.startswith("上联  ")]
    assert answered == ["上联  春风得意", "上联  山高水长"]  # the good lines around the bad one


def test_help_is_bilingual_and_lists_the_options(script: Path) -> None:
    top = run(script, "--help")
    assert top.returncode == 0 and "generate" in top.stdout and "对下联" in top.stdout
    gen = run(script, "generate", "--help")
    assert gen.returncode == 0
    for option in ("-n N", "--locks", "--head", "--embed", "--tone-mode", "--model", "--json", "字数 length"):
        assert option in gen.stdout


def test_the_decoder_module_points_at_the_command() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-m", "model.decoding.decoder"], capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == 2
    assert "duilian generate" in done.stderr


def test_known_lines_unreadable_after_loading_are_refused_as_the_bundles_fault(
    bundle_a: Path, tmp_path: Path
) -> None:
    """The command line reads the known lower lines on first use (lazy): a file damaged since
    the bundle was loaded and checked is the bundle's fault, said so, not a refused line."""
    import shutil

    from duilian.cli import Problem, answer
    from duilian.inputs import make_query
    from duilian.service import LoadedModel
    from model.store.fingerprint import FingerprintIndex, KnownLowers
    from model.store.layout import FINGERPRINTS_FILE, KNOWN_FILE, write_manifest
    from tests.serve.conftest import PAIRS

    bundle = tmp_path / "bundle"
    shutil.copytree(bundle_a, bundle)
    index = FingerprintIndex.load(bundle / FINGERPRINTS_FILE)
    (bundle / KNOWN_FILE).write_bytes(KnownLowers.encode(index, PAIRS))
    write_manifest(bundle)
    model = LoadedModel.load(bundle, warm=False, lazy=True)
    assert model.bundle.known is not None
    (bundle / KNOWN_FILE).write_bytes(b"not an lzma file")
    with pytest.raises(Problem) as caught:
        answer(model, make_query(PAIRS[0][0], 1))
    said = str(caught.value)
    assert caught.value.status == 2 and "模型无法读取" in said and KNOWN_FILE in said, said


@pytest.mark.slow
def test_the_command_asks_a_running_server_and_prints_what_it_would_print_itself(
    script: Path, site: LiveServer, graphs: Path
) -> None:
    """--server: the answers of a running server (a real uvicorn one), printed as the command
    prints its own; its refusals in its words with status 2; no server, status 1."""
    here = run(script, "generate", "-n", "3", *UPPERS[:2], graphs=graphs)
    there = run(script, "generate", "-n", "3", "--server", site.url, *UPPERS[:2])
    assert here.returncode == there.returncode == 0, there.stderr
    assert there.stdout == here.stdout and "上联  春风得意马蹄疾" in there.stdout
    as_json = run(script, "generate", "--json", "-n", "3", "--server", site.url, UPPERS[1])
    assert json.loads(as_json.stdout) == site_answer(site, {"upper": UPPERS[1], "n": 3})
    refused = run(script, "generate", "--server", site.url, "--locks", "春______", UPPERS[0])  # 春 reused
    assert refused.returncode == 2 and " / " in refused.stderr and refused.stdout == "", refused.stderr
    gone = run(script, "generate", "--server", f"http://127.0.0.1:{free_port()}", UPPERS[1], UPPERS[2])
    assert gone.returncode == 1 and "无法连接服务器" in gone.stderr and gone.stdout == ""


@pytest.mark.slow
def test_upper_lines_for_a_lower_line_as_the_site_gives_them(
    script: Path, site: LiveServer, graphs: Path
) -> None:
    """--reverse (下联求上联): the shipped bundle's reverse model, the site's answer to the same
    lower line, printed with the given line named 下联; through --server too."""
    done = run(script, "generate", "--reverse", "家和万事兴", "--json", "-n", "3", graphs=graphs)
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout)
    assert got == site_answer(site, {"lower": "家和万事兴", "n": 3})
    assert got["direction"] == "lower_to_upper" and got["lower"] == "家和万事兴"
    assert len(got["candidates"]) == 3 and all(c["tones"][-1] == "仄" for c in got["candidates"])
    here = run(script, "generate", "-r", "家和万事兴", "-n", "2", graphs=graphs)
    there = run(script, "generate", "-r", "家和万事兴", "-n", "2", "--server", site.url)
    assert here.returncode == there.returncode == 0, there.stderr
    assert here.stdout == there.stdout and here.stdout.startswith("下联  家和万事兴\n")
    hint = run(script, "generate", "家和万事兴", "-n", "1", graphs=graphs)
    assert "it ends 平: probably a lower line (try --reverse)" in hint.stdout


@pytest.mark.slow
def test_on_a_warm_graph_cache_the_command_runs_without_pytorch(
    script: Path, graphs: Path, tmp_path: Path
) -> None:
    """Once its graphs are cached, the command line decodes on ONNX Runtime alone: with PyTorch
    made unimportable it prints the very answer it prints with it (the decoder is built from the
    cached graphs and the bundle's arrays, model/decoding/onnx_engine.py)."""
    first = run(script, "generate", "春风得意马蹄疾", "--json", graphs=graphs)  # warms the cache
    assert first.returncode == 0, first.stderr
    blocked = tmp_path / "blocked"
    (blocked / "torch").mkdir(parents=True)
    (blocked / "torch" / "__init__.py").write_text("raise ImportError('PyTorch is blocked in this test')\n")
    env = {**os.environ, "PYTHONPATH": f"{blocked}{os.pathsep}{ROOT}"}
    done = subprocess.run(
        [str(script), "generate", "春风得意马蹄疾", "--json", "--graph-cache", str(graphs)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == first.stdout and json.loads(done.stdout)["candidates"]
    # the block is real: a fresh cache needs the export, which needs PyTorch
    cold = subprocess.run(
        [str(script), "generate", "春风得意马蹄疾", "--graph-cache", str(tmp_path / "cold")],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert cold.returncode != 0 and "PyTorch is blocked" in cold.stderr
