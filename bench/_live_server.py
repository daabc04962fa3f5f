"""A real ``python -m serve`` on loopback for the benchmarks (``served``): the shipped bundle
(or a random one of its shape), its result cache off, no rate limit, an admin token; and the
test set's upper lines to send it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from crawler.localredis import free_port, stop_process
from data.paths import corpus_dir, data_dir, default_model_dir

FALLBACK_LINES = [
    "春风得意",
    "山高水长",
    "明月照窗前",
    "一帆风顺年年好",
    "绿水青山，千秋画卷",
    "书山有路勤为径",
]
TOKEN = "bench-token"


def upper_lines(limit: int) -> list[str]:
    """Upper lines of the test set (read at run time, never stored), else a few of our own."""
    for path in (data_dir() / "test.tsv", corpus_dir() / "wb14123_test.tsv"):
        if path.is_file():
            with path.open(encoding="utf-8") as f:
                lines = [line.split("\t", 1)[0].strip() for line in f]
            return list(dict.fromkeys(u for u in lines if 0 < len(u) <= 32))[:limit]
    return FALLBACK_LINES


def fallback_bundle(out: Path, preset: str = "cpu") -> Path:
    """A randomly initialised model of a preset's shape (the shipped one's: ``cpu``), when no
    model is shipped: decoding costs the same whatever the weights."""
    import torch

    from data.vocab import Vocab
    from model.net.transformer import CoupletTransformer, ModelConfig
    from model.release.export import export_bundle
    from model.training.presets import PRESETS

    spm = data_dir() / "spm.model"
    vocab = Vocab.from_file(spm) if spm.is_file() else Vocab.train(FALLBACK_LINES, out.parent / "spm")
    shape = json.loads((PRESETS / f"{preset}.json").read_text())["model"]
    torch.manual_seed(0)
    model = CoupletTransformer(ModelConfig(vocab_size=len(vocab), **shape)).eval()
    return export_bundle(out, model, vocab, version=f"random-{preset}")


def start_server(
    model: Path, port: int, tmp: Path, timeout: float = 300, env: dict[str, str] | None = None
) -> subprocess.Popen[bytes]:
    """``python -m serve`` on ``port``, with ``env`` added to its settings, once its health answers
    200 (its decode workers have started their models: minutes when the shared machine is busy).
    Its log goes to ``tmp/server.log`` (a pipe nobody reads would fill and stall the server's
    logging in a long run)."""
    env = {
        **os.environ,
        "DUILIAN_SERVE_DATABASE_URL": f"sqlite:///{tmp / 'feedback.db'}",
        "DUILIAN_SERVE_RATE_LIMIT_PER_MINUTE": "0",
        "DUILIAN_SERVE_CACHE_SIZE": "0",
        "DUILIAN_SERVE_ADMIN_TOKEN": TOKEN,
        **(env or {}),
    }
    cmd = [
        sys.executable,
        "-m",
        "serve",
        "--port",
        str(port),
        "--model",
        str(model),
        "--log-level",
        "warning",
    ]
    log = tmp / "server.log"
    with open(log, "ab") as err:
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=err)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            said = log.read_text(encoding="utf-8", errors="replace")[-4000:]
            raise RuntimeError(f"server exited ({proc.returncode}); the end of {log}:\n{said}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/api/v1/health", timeout=1).status_code == 200:
                return proc
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    proc.kill()
    raise RuntimeError(f"server did not come up in {timeout:g} s")


def wait_known_lines(url: str, timeout: float = 180) -> None:
    """The server indexes the training pairs in the background: let it finish before measuring."""
    if not (data_dir() / "train.tsv").is_file():
        return
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and httpx.get(f"{url}/api/v1/health").json()["known_lines"] == 0:
        time.sleep(0.5)


def reload_bundle(port: int, model: Path, http: httpx.AsyncClient) -> Awaitable[httpx.Response]:
    """POST /api/v1/admin/reload of ``model`` (the server's admin token is ``TOKEN``)."""
    return http.post(
        f"http://127.0.0.1:{port}/api/v1/admin/reload",
        json={"model_dir": str(model)},
        headers={"X-Admin-Token": TOKEN},
    )


@dataclass
class Served:
    """A real ``python -m serve`` on loopback (``served``): its process, port, bundle and the
    figures that describe the setting."""

    proc: subprocess.Popen[bytes]
    port: int
    model: Path
    tmp: Path
    lines: list[str]
    info: dict[str, Any]
    setting: dict[str, object]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


@contextmanager
def served(prefix: str) -> Iterator[Served]:
    """Starts ``python -m serve`` (result cache off, no rate limit, an admin token) on the
    shipped bundle (``DUILIAN_SERVE_MODEL_DIR`` names another; a random one of its shape when
    none is shipped), waits for its known lines, and stops it at the end."""
    lines = upper_lines(4000)
    with tempfile.TemporaryDirectory(prefix=prefix) as name:
        tmp = Path(name)
        model = Path(os.environ.get("DUILIAN_SERVE_MODEL_DIR", default_model_dir()))
        from model.store.layout import has_model

        shipped = has_model(model)
        if not shipped:
            model = fallback_bundle(tmp / "model")
        port = free_port()
        proc = start_server(model, port, tmp)
        try:
            server = Served(proc, port, model, tmp, lines, {}, {})
            wait_known_lines(server.url)
            server.info = httpx.get(f"{server.url}/api/v1/model", timeout=10).json()
            version = server.info["version"]
            server.setting = {
                "model": version if shipped else f"{version} (no shipped model)",
                "cores": float(os.cpu_count() or 0),
                "load_average_1min": os.getloadavg()[0],  # other work on the machine skews every figure
                "distinct_lines": float(len(lines)),
            }
            yield server
        finally:
            stop_process(proc, timeout=20)
