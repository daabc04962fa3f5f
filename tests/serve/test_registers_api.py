"""The register a request asks for (``register``): a bundle with registers lists them and
writes in each, the answers differing; one without registers writes general only and refuses
another register with a bilingual 422; an unknown register is a 422 of the schema."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from data.vocab import Vocab
from serve.main import create_app
from serve.settings import Settings
from tests.serve.conftest import build_bundle

UPPER = "春风得意"


@pytest.mark.slow
def test_a_bundle_with_registers_writes_in_each(tmp_path: Path, settings: Settings, vocab: Vocab) -> None:
    bundle = build_bundle(tmp_path / "m", vocab, seed=4, version="test-registers", registers=3)
    with TestClient(create_app(settings.model_copy(update={"model_dir": bundle}))) as c:
        assert c.get("/api/v1/model").json()["registers"] == ["general", "classical", "formal"]
        answers = {}
        for register in ("general", "classical", "formal"):
            r = c.post("/api/v1/generate", json={"upper": UPPER, "n": 3, "register": register})
            assert r.status_code == 200, r.text
            answers[register] = [(x["text"], x["score"]) for x in r.json()["candidates"]]
        assert answers["general"] == [
            (x["text"], x["score"])
            for x in c.post("/api/v1/generate", json={"upper": UPPER, "n": 3}).json()["candidates"]
        ]  # general is the default
        assert answers["formal"] != answers["general"]  # and the cache keeps them apart


def test_a_bundle_without_registers_writes_general_only(client: TestClient) -> None:
    assert client.get("/api/v1/model").json()["registers"] == ["general"]
    assert client.post("/api/v1/generate", json={"upper": UPPER, "register": "general"}).status_code == 200
    r = client.post("/api/v1/generate", json={"upper": UPPER, "register": "formal"})
    assert r.status_code == 422
    assert "语体" in r.json()["detail"] and "formal register" in r.json()["detail"]
    assert client.post("/api/v1/generate", json={"upper": UPPER, "register": "solemn"}).status_code == 422
