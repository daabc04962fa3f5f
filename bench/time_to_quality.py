"""Time to quality: wall time until a preset, trained from scratch, first reaches a validation
perplexity below 74.4 (the published Transformer's test perplexity, docs/MEASUREMENTS.md).

Runs ``python -m model.train`` on the data stage's splits with the preset as it is (its own
learning-rate schedule; no proposer, no test evaluation, no export) in a fresh folder, and
reads its validation log as it grows; the run is stopped at the first evaluation below the
target, or when it has trained ``DUILIAN_BENCH_TTQ_MINUTES`` (default twice the goal). The
minutes are the trainer's own clock, validations included, so they match its logs; the
process's wall time, start-up and data loading included, is reported beside them.

Goals: 45 minutes for ``cpu`` on 2 cores, 2 for ``gpu`` on one accelerator. This takes up
to the cap (1.5 hours for ``cpu``), so ``make bench`` runs it only when named:
``make bench BENCH_ARGS=time_to_quality``. ``--quick``: the ``tiny`` preset for a minute.
"""

from __future__ import annotations

import argparse
import csv
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from data.paths import ROOT, data_dir, work_dir

DEFAULT = False  # not part of a plain `make bench`: it trains for up to an hour and a half
TARGET_PPL = 74.4
GOAL_MINUTES = {"cpu": 45.0, "gpu": 2.0, "tiny": 1.0}


def first_below(log: Path, target: float) -> dict[str, float] | None:
    """The first row of a validation log (valid_log.csv) whose perplexity is below ``target``."""
    if not log.is_file():
        return None
    with log.open(encoding="utf-8") as f:
        for row in csv.DictReader(f):
            try:
                if float(row["valid_ppl"]) < target:
                    return {"step": float(row["step"]), "minutes": float(row["minutes"])}
            except (KeyError, TypeError, ValueError):  # a row being written
                continue
    return None


def last_row(log: Path) -> dict[str, str]:
    if not log.is_file():
        return {}
    with log.open(encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    return rows[-1] if rows else {}


def measure(preset: str, data: Path, out: Path, cap_minutes: float, extra: list[str]) -> dict[str, Any]:
    shutil.rmtree(out, ignore_errors=True)  # from scratch, every time
    out.mkdir(parents=True)
    cmd = [
        sys.executable,
        "-m",
        "model.train",
        "--preset",
        preset,
        "--data-dir",
        str(data),
        "--out",
        str(out),
    ]
    cmd += ["--skip-data", "--no-proposer", "--no-eval", "--no-export", "--set", "patience=0", *extra]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    log = out / "valid_log.csv"
    start = time.monotonic()
    with (out / "train.log").open("wb") as sink:
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=sink, stderr=subprocess.STDOUT)
        try:
            while proc.poll() is None:
                if first_below(log, TARGET_PPL) is not None:
                    break
                trained = float(last_row(log).get("minutes") or 0.0)
                if trained >= cap_minutes or time.monotonic() - start > 60 * (cap_minutes + 15):
                    break
                time.sleep(1.0)
            wall = (time.monotonic() - start) / 60
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
    found, last = first_below(log, TARGET_PPL), last_row(log)
    if not last:
        raise RuntimeError(f"the {preset} run wrote no validation; see {out / 'train.log'}")
    goal = GOAL_MINUTES.get(preset, 0.0)
    figures: dict[str, Any] = {
        f"{preset}_target_ppl": TARGET_PPL,
        f"{preset}_reached": int(found is not None),
        f"{preset}_last_step": int(float(last["step"])),
        f"{preset}_last_minutes": round(float(last["minutes"]), 2),
        f"{preset}_last_ppl": float(last["valid_ppl"]),
        f"{preset}_wall_minutes": round(wall, 2),
        f"{preset}_cap_minutes": cap_minutes,
    }
    if found is not None:
        figures[f"{preset}_minutes_to_target"] = round(found["minutes"], 2)
        figures[f"{preset}_step_at_target"] = int(found["step"])
    figures[f"{preset}_goal_minutes"] = goal
    figures[f"{preset}_goal_met"] = int(found is not None and found["minutes"] <= goal)
    return figures


def run(args: argparse.Namespace) -> dict[str, Any]:
    quick = bool(getattr(args, "quick", False))
    data = data_dir()
    if not (data / "train.tsv").is_file() and not (data / "train.tsv.xz").is_file():
        return {"skipped": f"no training data in {data}: run `make data` first"}
    import torch

    preset = "tiny" if quick else "gpu" if torch.cuda.is_available() else "cpu"
    cap = float(os.environ.get("DUILIAN_BENCH_TTQ_MINUTES") or 2 * GOAL_MINUTES[preset])
    extra = ["--set", "eval_every=20", "--max-steps", "400"] if quick else []
    figures = measure(preset, data, work_dir() / "bench" / f"time_to_quality_{preset}", cap, extra)
    figures["load_average_1min"] = round(os.getloadavg()[0], 2)
    return figures
