"""The OpenAPI document is the contract (issue 41 item 1): schemathesis, a property-based API
tester that reads ``/openapi.json``, runs every operation with positive and negative data and
every check against a real server (uvicorn on loopback) and finds nothing: each status the
server sends is documented, with the body it sends."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from data.paths import ROOT
from serve.main import create_app
from serve.settings import Settings
from tests.serve.conftest import LiveServer, wait_known
from tests.serve.test_banners_api import banners_file as banners_file

SCHEMATHESIS = Path(sys.executable).with_name("schemathesis")
CONFIG = ROOT / "schemathesis.toml"


@pytest.fixture
def live_with_limits(settings: Settings, banners_file: Path) -> Iterator[LiveServer]:
    """The test site with a 横批 table and its rate limit on (a burst of 1,000: the limit's 429 is
    part of the contract, but most requests must reach the routes)."""
    changes = {"rate_limit_per_minute": 6000.0, "rate_limit_burst": 1000, "banners": banners_file}
    limited = settings.model_copy(update=changes)
    with LiveServer(create_app(limited), start_timeout=600) as server:  # its first ONNX export
        wait_known(server.app)
        yield server


def run_schemathesis(url: str, out: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    if not SCHEMATHESIS.is_file():
        pytest.fail(f"no {SCHEMATHESIS}: install the project's dev dependencies (make setup)")
    args = [str(SCHEMATHESIS), "--config-file", str(CONFIG), "run", f"{url}/openapi.json"]
    args += ["--checks", "all", "--mode", "all", "--max-examples", "12", "--workers", "1", "--seed", "41"]
    args += ["--report", "ndjson", "--report-ndjson-path", str(out / "events.ndjson"), *extra]
    return subprocess.run(args, capture_output=True, text=True, timeout=900, cwd=out, check=False)


def requests_made(events: Path) -> int:
    """The requests schemathesis sent, counted from its event log."""
    text = events.read_text(encoding="utf-8")
    return text.count('"response"')


@pytest.mark.slow
@pytest.mark.parametrize("token", [None, "test-token"], ids=["no-token", "admin-token"])
def test_schemathesis_finds_no_failure(
    live_with_limits: LiveServer, tmp_path: Path, token: str | None
) -> None:
    headers = ["-H", f"X-Admin-Token: {token}"] if token else []
    run = run_schemathesis(live_with_limits.url, tmp_path, *headers)
    summary = run.stdout[run.stdout.rfind("SUMMARY") :]
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-2000:]
    assert "No issues found" in summary or "passed" in summary, summary
    assert requests_made(tmp_path / "events.ndjson") >= 200, summary  # a bounded run, not a token one


def test_every_refusal_is_documented_as_the_bilingual_body(settings: Settings) -> None:
    app = create_app(settings)
    doc = app.openapi()
    assert "HTTPValidationError" not in json.dumps(doc)  # FastAPI's list of {loc, msg, type}: never sent
    for path, methods in doc["paths"].items():
        for method, op in methods.items():
            for code, response in op["responses"].items():
                if code.startswith(("4", "5")) and not (path.endswith("/health") and code == "503"):
                    ref = response["content"]["application/json"]["schema"]["$ref"]
                    assert ref.endswith("/ErrorBody"), (method, path, code)
    generate = doc["paths"]["/api/v1/generate"]["post"]["responses"]
    assert {"413", "422", "429", "503"} <= set(generate)
    assert "Retry-After" in generate["429"]["headers"]
    assert {"401", "403", "429"} <= set(doc["paths"]["/api/v1/admin/reload"]["post"]["responses"])
