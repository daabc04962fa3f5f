"""The API's contract, a longer run than the test's: schemathesis (``--checks all``, positive and
negative data) against a real ``python -m serve`` on the shipped bundle, about 200 examples an
operation (``--quick``: 20), and its summary written to ``work/bench/contract-summary.txt``.

tests/serve/test_openapi_contract.py runs 12 examples an operation on the test bundle, every
time the tests run; this one is for ``make bench``: minutes, a few thousand requests. The server
runs with the decode in its own process (no worker processes: a quicker start), the rate limits
and the decode budget raised so that requests reach the routes (their 429 stays documented and
allowed), and no admin token (the admin route answers its documented 403).
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench._mixed_load import start
from crawler.localredis import stop_process
from data.paths import ROOT, default_model_dir, work_dir
from model.store.layout import has_model

SCHEMATHESIS = Path(sys.executable).with_name("schemathesis")
SERVER = {
    "DUILIAN_SERVE_DECODE_PROCESSES": "0",
    "DUILIAN_SERVE_RATE_LIMIT_PER_MINUTE": "60000",
    "DUILIAN_SERVE_RATE_LIMIT_BURST": "10000",
    "DUILIAN_SERVE_COST_PER_MINUTE": "10000000",
    "DUILIAN_SERVE_COST_BURST": "1000000",
}


def summary(stdout: str) -> str:
    return stdout[stdout.rfind("SUMMARY") :] if "SUMMARY" in stdout else stdout[-4000:]


def run(args: argparse.Namespace) -> dict[str, object]:
    if not SCHEMATHESIS.is_file():
        return {"skipped": f"no {SCHEMATHESIS}: install the dev dependencies"}
    if not has_model(default_model_dir()):
        return {"skipped": "no bundle in models/default"}
    examples = 20 if getattr(args, "quick", False) else 200
    with tempfile.TemporaryDirectory(prefix="bench-contract-") as name:
        tmp = Path(name)
        proc, url = start(default_model_dir(), tmp, SERVER)
        try:
            cmd = [
                str(SCHEMATHESIS),
                "--config-file",
                str(ROOT / "schemathesis.toml"),
                "run",
                f"{url}/openapi.json",
            ]
            cmd += ["--checks", "all", "--mode", "all", "--max-examples", str(examples), "--workers", "1"]
            cmd += ["--seed", "41", "--report", "ndjson", "--report-ndjson-path", str(tmp / "events.ndjson")]
            started = time.monotonic()
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=3600, cwd=tmp, check=False)
            seconds = time.monotonic() - started
            events = (tmp / "events.ndjson").read_text(encoding="utf-8")
        finally:
            stop_process(proc, timeout=20)
    text = summary(done.stdout)
    out = work_dir() / "bench"
    out.mkdir(parents=True, exist_ok=True)
    (out / "contract-summary.txt").write_text(text, encoding="utf-8")
    failures = re.findall(r"(\d+) failures?", text)
    return {
        "examples_per_operation": examples,
        "requests": events.count('"response"'),
        "seconds": round(seconds, 1),
        "exit_status": done.returncode,
        "failures": int(failures[0]) if failures else 0,
        "no_issues": done.returncode == 0,
        "summary_file": str(out / "contract-summary.txt"),
        "summary_tail": json.dumps(text.strip().splitlines()[-3:], ensure_ascii=False),
    }
