"""A first start shows the project's own lines only: the ONNX exporter's (onnxscript's,
onnx_ir's) INFO lines are silenced, and the first export says so once, with its time."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from crawler.localredis import free_port
from data.paths import ROOT
from model.decoding.onnx_engine import TRANSFORMER_GRAPHS, GraphCache
from model.decoding.options import SERVE_INT8
from model.export.engines import torch_decoder
from model.export.models import models_of
from model.store.bundle import decoder_graph_keys, load_bundle
from tests.serve.test_observability import wait_healthy

LIBRARIES = ("onnxscript", "onnx_ir", "torch.onnx", "torch.export")


def reverse_graphs_into(bundle: Path, run_cache: Path, folder: Path) -> None:
    """The graphs of ``bundle``'s reverse model as the server reads them (``SERVE_INT8``), from
    the run's graph folder (exported there first when no test has yet), into ``folder``: a server
    started on ``folder`` then exports its main model only (the reverse model's export is another
    test's, once a run)."""
    b = load_bundle(bundle)
    reverse = models_of(b).reverse
    assert reverse is not None
    keys = decoder_graph_keys(b, reverse=True)
    torch_decoder(reverse, b.vocab, int8=SERVE_INT8, runtime="onnx", graph_cache=run_cache, graph_keys=keys)
    run, ours = GraphCache(run_cache, keys[0] or ""), GraphCache(folder, keys[0] or "")
    folder.mkdir(parents=True, exist_ok=True)
    for name in TRANSFORMER_GRAPHS:
        shutil.copyfile(run.path(name, SERVE_INT8), ours.path(name, SERVE_INT8))


@pytest.mark.slow
def test_a_first_server_start_logs_one_export_and_none_of_the_exporters_lines(
    bundle_a: Path, tmp_path: Path, graph_cache: Path
) -> None:
    port, log_file = free_port(), tmp_path / "server.log"
    reverse_graphs_into(bundle_a, graph_cache, tmp_path / "g")  # the main model's graphs are not there
    env = {
        **os.environ,
        "DUILIAN_WORK_DIR": str(tmp_path / "work"),
        "DUILIAN_GRAPH_CACHE": str(tmp_path / "g"),
        "DUILIAN_SERVE_DECODE_PROCESSES": "0",
    }
    args = ["--model", str(bundle_a), "--database-url", f"sqlite:///{tmp_path}/f.db", "--port", str(port)]
    with log_file.open("w") as err:
        server = subprocess.Popen([sys.executable, "-m", "serve", *args], env=env, stdout=err, stderr=err)
    try:
        wait_healthy(server, f"http://127.0.0.1:{port}", log_file)
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=60)
    lines = log_file.read_text(encoding="utf-8").splitlines()
    assert not [line for line in lines if any(name in line for name in LIBRARIES)], "\n".join(lines[:20])
    assert sum("ONNX: exporting the main model's graphs" in line for line in lines) == 1
    assert sum("ONNX: the main model's graphs exported in" in line for line in lines) == 1
    assert not [line for line in lines if "reverse model's graphs" in line]  # read from the folder
    assert len(lines) < 30, "\n".join(lines)


@pytest.mark.slow
def test_a_first_command_line_run_prints_its_own_lines_only(bundle_a: Path, tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    script = Path(sys.executable).with_name("duilian")
    args = ["generate", "春风得意", "-n", "1", "--model", str(bundle_a), "--graph-cache", str(tmp_path)]
    run = subprocess.run(
        [str(script), *args], capture_output=True, text=True, env=env, timeout=300, check=False
    )
    assert run.returncode == 0, run.stderr
    err = run.stderr.splitlines()
    assert err and all(line.startswith("duilian: ONNX: ") for line in err), run.stderr
    assert any("exported in" in line for line in err)
