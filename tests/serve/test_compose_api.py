"""POST /api/v1/compose on a real uvicorn server with the shipped model decoding in a real decode
worker process (as `make serve` runs it): whole couplets whose heads stand where asked and that
keep every rule, the very object `duilian compose --json` prints (the command line decodes in its
own process), the same couplets again, and bad input a bilingual 422."""

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

from data.paths import ROOT, default_model_dir
from model.decoding.options import SERVE_INT8, SERVE_RUNTIME
from serve.main import create_app
from serve.settings import Settings
from tests.serve.conftest import LiveServer

URL = "/api/v1/compose"
SCRIPT = Path(sys.executable).with_name("duilian")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    settings = Settings(
        model_dir=default_model_dir(),
        database_url=f"sqlite:///{tmp_path_factory.mktemp('db') / 'f.db'}",
        known_pairs=None,
        banners=None,
        sensitive_words=None,
        int8=SERVE_INT8,
        runtime=SERVE_RUNTIME,
        decode_processes=1,  # the drafts and lower lines are decoded in a worker process
        rate_limit_per_minute=0,
    )
    with LiveServer(create_app(settings), start_timeout=600) as server:  # the first ONNX export
        yield server


def post(site: LiveServer, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(f"{site.url}{URL}", json=body, timeout=300)


def test_a_name_gets_whole_couplets(site: LiveServer) -> None:
    r = post(site, {"head": "张伟", "length": 7, "n": 3})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["head"] == "张伟" and body["pattern"] == "7" and len(body["couplets"]) == 3
    for c in body["couplets"]:
        assert c["upper"][0] == "张" and c["lower"][0] == "伟" and len(c["upper"]) == len(c["lower"]) == 7
        check = c["check"]
        assert check["hard_ok"] and check["report"]["tone_end"] is True
        assert check["upper_tones"][-1] == "仄" and check["lower_tones"][-1] == "平"
        assert {r["name"] for r in check["rules"]} >= {"length", "no_reuse", "tone_end", "horse_hoof"}
        assert c["banner"] == c["banners"][0]["text"]
    assert post(site, {"head": "张伟", "length": 7, "n": 3}).json() == body  # deterministic


@pytest.mark.slow
def test_the_command_line_prints_the_sites_object(site: LiveServer) -> None:
    if not SCRIPT.is_file():
        pytest.fail(f"no console script {SCRIPT}: install the project again (pip install -e .)")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [str(SCRIPT), "compose", "恭贺新禧", "--length", "4,7", "-n", "2", "--json"],
        capture_output=True, text=True, env=env, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout)
    want = post(site, {"head": "恭贺新禧", "length": "4,7", "n": 2}).json()
    assert got == want
    for c in got["couplets"]:
        assert (c["upper"][0], c["upper"][5], c["lower"][0], c["lower"][5]) == tuple("恭贺新禧")
        assert c["check"]["report"]["horse_hoof"] is True
    plain = subprocess.run(
        [str(SCRIPT), "compose", "恭贺新禧", "--length", "4,7", "-n", "2"],
        capture_output=True, text=True, env=env, timeout=600,
    )  # fmt: skip
    assert plain.returncode == 0 and got["couplets"][0]["upper"] in plain.stdout
    bad = subprocess.run(
        [str(SCRIPT), "compose", "张a"], capture_output=True, text=True, env=env, timeout=120
    )
    assert bad.returncode == 2 and "汉字" in bad.stderr and "Chinese" in bad.stderr and not bad.stdout


@pytest.mark.parametrize(
    "body",
    [
        {"head": "Zhang", "length": 7},
        {"head": "张伟明", "length": 7},
        {"head": "张伟", "length": "4x"},
        {"head": "张伟", "length": "4,4,4,4,4"},
        {"head": "张张"},
        {},
        {"head": "张伟", "n": 0},
        {"head": "张伟", "seed": -1},
        {"head": "张伟", "lenght": 7},  # a misspelt field
        {"head": "张伟", "length": 16},  # no couplet of that shape to draft from
    ],
)
def test_bad_input_is_a_bilingual_422(site: LiveServer, body: dict[str, Any]) -> None:
    r = post(site, body)
    assert r.status_code == 422, r.text
    detail = r.json()["detail"]
    assert isinstance(detail, str) and " / " in detail
