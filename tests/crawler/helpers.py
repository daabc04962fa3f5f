"""Helpers of the crawler tests: run a crawl in its own process, read its output."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from crawler.mirror.pairs import Pair
from data.paths import ROOT

__all__ = ["FAST", "Pair", "crawl_cmd", "pairs_of", "popen", "read_items", "wait_until_opened"]

# Politeness off against loopback (the settings that make it so are under test too).
FAST = [
    "DOWNLOAD_DELAY=0",
    "DOWNLOAD_DELAY_JITTER=0",
    "AUTOTHROTTLE_START_DELAY=0",
    "AUTOTHROTTLE_MAX_DELAY=0.2",
    "LOG_LEVEL=INFO",
    "DISTRIBUTED_IDLE_CLOSE=1.5",
]


def crawl_cmd(*args: str, settings: list[str] | None = None) -> list[str]:
    """``python -m crawler ...`` with the fast settings."""
    sets = [x for s in [*FAST, *(settings or [])] for x in ("-s", s)]
    return [sys.executable, "-m", "crawler", *args, *sets]


def popen(cmd: list[str], log: Path, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    full_env = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    with log.open("ab") as f:
        return subprocess.Popen(cmd, cwd=ROOT, stdout=f, stderr=subprocess.STDOUT, env=full_env)


def read_items(path: Path) -> list[dict[str, str]]:
    if not path.exists():
        return []
    with path.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def pairs_of(items: list[dict[str, str]]) -> list[Pair]:
    return [(i["upper"], i["lower"]) for i in items]


def wait_until_opened(logs: list[Path], procs: list[subprocess.Popen[bytes]], timeout: float = 60) -> None:
    """Until every crawl has logged "Spider opened" (or one has ended)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and any(p.poll() is None for p in procs):
        if all(log.exists() and "Spider opened" in log.read_text(errors="replace") for log in logs):
            return
        time.sleep(0.02)
