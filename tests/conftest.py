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


# The files that take longest (docs/MEASUREMENTS.md, "Test time"), handed to pytest-xdist's workers
# first (``make test`` keeps the collection's order: ``--no-loadscope-reorder``), so that no long
# file starts last and holds the run's end while the other workers are done. Only the order
# changes: a file missing from this list runs after these, in the order it is collected.
LONG_FIRST = (
    "model/training/test_train.py",
    "model/decoding/test_onnx_engine.py",
    "serve/test_quiet_start.py",
    "serve/test_api.py",
    "serve/test_workers.py",
    "data/test_corpus_output.py",
    "duilian/test_check.py",
    "duilian/test_cli.py",
    "duilian/test_compose.py",
    "serve/test_page.py",
    "model/decoding/test_onnx_templates.py",
    "serve/test_hardening.py",
    "model/training/test_device_scripts.py",
    "serve/test_cluster.py",
    "serve/test_workers_fault.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    tests = Path(__file__).resolve().parent
    if missing := [name for name in LONG_FIRST if not (tests / name).is_file()]:
        raise pytest.UsageError(f"tests/conftest.py LONG_FIRST names files that are not there: {missing}")
    rank = {name: i for i, name in enumerate(LONG_FIRST)}

    def order(item: pytest.Item) -> int:
        path = Path(item.path).resolve()
        return (
            rank.get(path.relative_to(tests).as_posix(), len(LONG_FIRST))
            if path.is_relative_to(tests)
            else len(LONG_FIRST)
        )

    items.sort(key=order)  # stable: each file's tests keep their order
