"""Decoding in worker processes (``decode_processes``): the same answers as in the server
process, errors that cross the process boundary intact, and workers retired on reload."""

from __future__ import annotations

import os
import pickle
import shutil
import time
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from crawler.localredis import running
from model.decoding.plan import ConstraintError
from model.export.models import models_of
from model.export.onnx_export import transformer_specs
from model.export.onnx_templates import template_key
from model.net.transformer import CoupletTransformer
from model.store.bundle import load_bundle
from serve.main import create_app
from serve.pool import PooledModel
from serve.settings import Settings
from tests.serve.conftest import PAIRS

TOKEN = {"X-Admin-Token": "test-token"}


def answers(settings: Settings, uppers: list[str]) -> list[dict[str, object]]:
    with TestClient(create_app(settings)) as c:
        return [c.post("/api/v1/generate", json={"upper": u, "n": 5}).json() for u in uppers]


@pytest.mark.slow
def test_worker_processes_answer_as_the_server_process_does(settings: Settings) -> None:
    uppers = [upper for upper, _ in PAIRS[:6]] + ["上海自来水来自海上"]
    pooled = settings.model_copy(update={"decode_processes": 2})
    app = create_app(pooled)
    with TestClient(app) as c:
        model = app.state.service.model
        assert isinstance(model, PooledModel)
        assert len(model.pids) == 2 and os.getpid() not in model.pids  # two other processes decode
        got = [c.post("/api/v1/generate", json={"upper": u, "n": 5}).json() for u in uppers]
    assert got == answers(settings, uppers)
    assert all(body["candidates"] for body in got)


@pytest.mark.slow
def test_the_checks_suggestions_come_the_same_from_a_worker(settings: Settings) -> None:
    """All places of a line go to one worker in one ``alternatives_at``: the suggestions are the
    ones the server process gives."""
    couplets = [
        ("花开富贵", "竹报富安"),
        ("春风得意", "秋秋生辉"),
        (PAIRS[0][0], PAIRS[1][1][: len(PAIRS[0][0])]),
    ]

    def checked(s: Settings) -> list[dict]:
        with TestClient(create_app(s)) as c:
            return [c.post("/api/v1/check", json={"upper": u, "lower": lo}).json() for u, lo in couplets]

    got = checked(settings.model_copy(update={"decode_processes": 2}))
    assert got == checked(settings)
    assert got[0]["suggestions"]["items"][0]["replacements"]  # (the reused 富 gets a replacement)


def test_constraint_errors_cross_the_process_boundary(settings: Settings) -> None:
    error = pickle.loads(pickle.dumps(ConstraintError("required_chars", "嵌字冲突", "conflict")))
    assert (error.constraint, error.zh, error.en, str(error)) == (
        "required_chars",
        "嵌字冲突",
        "conflict",
        "嵌字冲突 / conflict",
    )
    with TestClient(create_app(settings.model_copy(update={"decode_processes": 1}))) as c:
        r = c.post("/api/v1/generate", json={"upper": "春风得意", "required_chars": "春"})
        assert r.status_code == 422, r.text
        assert "春" in r.json()["detail"] and " / " in r.json()["detail"]
        assert c.post("/api/v1/generate", json={"upper": "春风得意"}).status_code == 200


@pytest.mark.slow
def test_reload_retires_the_old_workers(settings: Settings, bundle_b: Path) -> None:
    app = create_app(settings.model_copy(update={"decode_processes": 1}))
    with TestClient(app) as c:
        old = app.state.service.model
        assert c.post("/api/v1/generate", json={"upper": "春风得意"}).json()["model_version"] == "test-a"
        r = c.post("/api/v1/admin/reload", json={"model_dir": str(bundle_b)}, headers=TOKEN)
        assert r.status_code == 200, r.text
        new = app.state.service.model
        assert isinstance(new, PooledModel) and new.pids != old.pids
        assert c.post("/api/v1/generate", json={"upper": "春风得意"}).json()["model_version"] == "test-b"
        deadline = time.monotonic() + 60
        while any(running(pid) for pid in old.pids) and time.monotonic() < deadline:  # once idle
            time.sleep(0.05)
        assert not any(running(pid) for pid in old.pids)


def templates_of(bundle: Path) -> list[str]:
    """The files of the traced templates (model/export/onnx_templates.py) of ``bundle``'s
    encoder-decoder's graphs; its reverse model's are the same (no graph reads a direction)."""
    model = models_of(load_bundle(bundle)).model
    assert isinstance(model, CoupletTransformer)
    return [f"template-{template_key(*spec())}.onnx" for spec in transformer_specs(model).values()]


def graph_files(folder: Path) -> dict[str, tuple[int, bytes]]:
    """The graphs in ``folder`` (not the export locks, nor the traced templates they are made from)."""
    return {
        p.name: (p.stat().st_ino, p.read_bytes())
        for p in folder.glob("*.onnx")
        if not p.name.startswith("template-")
    }


@pytest.mark.slow
def test_workers_keep_their_graphs_and_a_restart_or_reload_reads_them(
    settings: Settings, tmp_path: Path
) -> None:
    """Two decode workers starting on a graph cache without the bundle's graphs both export the
    same graphs and publish them, answering as the server process does on the run's graphs; the
    next server, and a reload of the same bundle, read those very files (not one rewritten) and
    answer as the first server did. The cache holds the traced templates of the model's shape (a
    machine that has exported another model of that shape keeps them), so the workers export
    without tracing: a first start that traces is test_quiet_start.py's."""
    uppers = [upper for upper, _ in PAIRS[:4]]
    served = answers(settings, uppers)  # (on the run's graph folder: its templates traced there once)
    graphs = tmp_path / "graphs"
    graphs.mkdir()
    assert settings.graph_cache is not None
    for name in templates_of(settings.model_dir):
        shutil.copyfile(settings.graph_cache / name, graphs / name)
    pooled = settings.model_copy(update={"decode_processes": 2, "graph_cache": graphs})
    with TestClient(create_app(pooled)) as c:
        first = [c.post("/api/v1/generate", json={"upper": u, "n": 5}).json() for u in uppers]
    assert first == served
    written = graph_files(graphs)
    # six graphs for the model and six for its reverse model (the warm-up decodes with both)
    assert len(written) == 12
    assert {p.suffix for p in graphs.iterdir()} == {".onnx", ".lock"}  # no temporary left
    app = create_app(pooled)
    with TestClient(app) as c:
        assert [c.post("/api/v1/generate", json={"upper": u, "n": 5}).json() for u in uppers] == first
        r = c.post("/api/v1/admin/reload", json={}, headers=TOKEN)
        assert r.status_code == 200, r.text
        assert [c.post("/api/v1/generate", json={"upper": u, "n": 5}).json() for u in uppers] == first
    assert graph_files(graphs) == written  # the same files, same inodes: read, never written again


def test_the_graph_cache_setting_can_be_turned_off(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("DUILIAN_WORK_DIR", str(tmp_path))
    monkeypatch.delenv("DUILIAN_GRAPH_CACHE")  # the test run's own folder (tests/conftest.py)
    assert Settings().graph_cache == tmp_path / "cache" / "onnx"
    monkeypatch.setenv("DUILIAN_GRAPH_CACHE", str(tmp_path / "elsewhere"))
    assert Settings().graph_cache == tmp_path / "elsewhere"
    for off in ("", "off", "none"):
        monkeypatch.setenv("DUILIAN_SERVE_GRAPH_CACHE", off)
        assert Settings().graph_cache is None
    monkeypatch.setenv("DUILIAN_SERVE_GRAPH_CACHE", str(tmp_path / "g"))
    assert Settings().graph_cache == tmp_path / "g"
