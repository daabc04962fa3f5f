"""For every test: one folder of exported ONNX graphs for the whole run.

Exporting a model's graphs with the ``torch.export``-based exporter takes tens of seconds on
two cores, and the same few models (the fixture bundles, the shipped one) are loaded by many
tests and by the servers and command lines they start. ``DUILIAN_GRAPH_CACHE`` points them
all, child processes included, at one folder, so each model is exported once per run; the
cache keys on the weights and the traced code, so no test reads another model's graphs. The
tests about exporting and caching pass their own folders, or none.

``make test`` runs the tests on every core (pytest-xdist's workers, ``PYTEST_XDIST_WORKER``)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture
def redis_url() -> Iterator[str]:
    """A real redis-server of the test's own on a free loopback port (the crawler's queue, the
    servers' shared rate limit and result cache)."""
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server missing (bash scripts/sysdeps.sh installs it)")
    from crawler.localredis import LocalRedis

    with LocalRedis() as url:
        yield url


@pytest.fixture(scope="session", autouse=True)
def graph_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The run's graph folder: shared by pytest-xdist's workers (beside their own temporary
    folders; the cache's entries are written whole by one process at a time), or
    ``DUILIAN_TEST_GRAPH_CACHE`` when set (``make check`` keeps one between runs)."""
    kept = os.environ.get("DUILIAN_TEST_GRAPH_CACHE")
    if kept:
        folder = Path(kept)
    elif os.environ.get("PYTEST_XDIST_WORKER") is None:  # one process: no workers to share with
        folder = tmp_path_factory.mktemp("onnx-graphs")
    else:
        folder = tmp_path_factory.getbasetemp().parent / "onnx-graphs"
    folder.mkdir(parents=True, exist_ok=True)
    with pytest.MonkeyPatch.context() as env:
        env.setenv("DUILIAN_GRAPH_CACHE", str(folder))
        yield folder
