"""A client generated from the server's own ``/openapi.json`` (openapi-python-client, a dev
dependency) works against a live server: generate, alternatives and feedback answer parsed
models, and a refusal (422, 429) parses as the bilingual ``ErrorBody``. The client is generated
into the test's folder each run, from the document the server serves: nothing generated is
committed, so the client can never lag behind the document."""

from __future__ import annotations

import importlib
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import pytest

from serve.main import create_app
from serve.settings import Settings
from tests.serve.conftest import PAIRS, LiveServer, wait_known

GENERATOR = Path(sys.executable).with_name("openapi-python-client")
PACKAGE = "duilian_api_client"


@pytest.fixture
def live_limited(settings: Settings) -> Iterator[LiveServer]:
    """The test site with a decode budget small enough to be spent by a few long requests."""
    budget = settings.model_copy(update={"cost_per_minute": 60.0, "cost_burst": 200})
    with LiveServer(create_app(budget)) as server:
        wait_known(server.app)
        yield server


def generated_client(url: str, folder: Path) -> ModuleType:
    """The package openapi-python-client writes for ``url``'s document, imported."""
    if not GENERATOR.is_file():
        pytest.fail(f"no {GENERATOR}: install the project's dev dependencies (make setup)")
    document = folder / "openapi.json"
    document.write_bytes(httpx.get(f"{url}/openapi.json").content)
    run = subprocess.run(
        [
            str(GENERATOR),
            "generate",
            "--path",
            str(document),
            "--meta",
            "none",
            "--output-path",
            str(folder / PACKAGE),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    # the one warning allowed: the SVG drawing is no JSON body, so its call returns no parsed answer
    warned = [line for line in (run.stdout + run.stderr).splitlines() if line.startswith("WARNING")]
    assert warned == ["WARNING parsing GET /api/v1/scroll.svg within couplets."], run.stdout
    sys.path.insert(0, str(folder))
    for name in [m for m in sys.modules if m == PACKAGE or m.startswith(f"{PACKAGE}.")]:
        del sys.modules[name]  # another test's generated package of the same name
    return importlib.import_module(PACKAGE)


def call(package: ModuleType, operation: str, client: Any, body: Any) -> Any:
    module = importlib.import_module(f"{package.__name__}.api.{operation}")
    return module.sync_detailed(client=client, body=body)


@pytest.mark.slow
def test_a_generated_client_calls_the_api_and_reads_its_refusals(
    live_limited: LiveServer, tmp_path: Path
) -> None:
    api = generated_client(live_limited.url, tmp_path)
    models = importlib.import_module(f"{PACKAGE}.models")
    client = api.Client(base_url=live_limited.url, raise_on_unexpected_status=True)
    upper = PAIRS[0][0]

    answer = call(api, "couplets.generate", client, models.GenerateRequest(upper=upper, n=3))
    assert answer.status_code == 200 and isinstance(answer.parsed, models.GenerateResponse)
    candidates = answer.parsed.candidates
    assert len(candidates) == 3 and all(len(c.text) == len(upper) for c in candidates)
    assert isinstance(candidates[0].report, models.RuleReportOut)
    lower = candidates[0].text

    alternatives = call(
        api,
        "couplets.alternatives",
        client,
        models.AlternativesRequest(upper=upper, lower=lower, position=1, n=3),
    )
    assert alternatives.status_code == 200 and isinstance(alternatives.parsed, models.AlternativesResponse)
    assert alternatives.parsed.alternatives and all(
        a.text[1] == a.char for a in alternatives.parsed.alternatives
    )

    vote = models.FeedbackRequest(
        kind=models.FeedbackRequestKind.VOTE,
        upper=upper,
        lower=lower,
        vote=models.FeedbackRequestVoteType0.VALUE_1,
        model_version=answer.parsed.model_version,
    )
    stored = call(api, "feedback.post_feedback", client, vote)
    assert (
        stored.status_code == 201
        and isinstance(stored.parsed, models.FeedbackResponse)
        and stored.parsed.id >= 1
    )

    refused = call(api, "couplets.generate", client, models.GenerateRequest(upper="春风2得意", n=3))
    assert refused.status_code == 422 and isinstance(refused.parsed, models.ErrorBody)
    zh, en = refused.parsed.detail.split(" / ")
    assert "数字" in zh and "digits" in en

    # the decode budget (200 at once): 4 characters × 10 candidates a request, the sixth is refused
    codes = [
        call(api, "couplets.generate", client, models.GenerateRequest(upper=u, n=10)) for u, _ in PAIRS[1:7]
    ]
    over = [r for r in codes if r.status_code == 429]
    assert over and isinstance(over[0].parsed, models.ErrorBody)
    assert " / " in over[0].parsed.detail and int(over[0].headers["Retry-After"]) >= 1
