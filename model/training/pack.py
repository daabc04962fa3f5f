"""A run trained on another machine (a lent GPU machine) packed there, and unpacked here:
``python -m model.ship pack`` (model/ship.py) and the unpacking half of ``finish``
(model.release.finish.finish_run). Imports neither pypinyin nor pyahocorasick: it runs on the
device image, which has neither.

``pack`` keeps what finishing needs and drops the rest: the best checkpoint of RUN and of its
proposer (``RUN/proposer``) as fp16 weight-only checkpoints (no optimizer state), their
logs, plots and configs, and ``device.json`` (preset, hardware, versions). It writes them as
one tar file, ``OUT/run.tar``, cut into ``OUT/run.tar.part-000``, ``-001``, ... of 15 MiB when
larger, because the device tool returns at most 8 files of at most 16 MiB each. To join by
hand: ``cat run.tar.part-* > run.tar && tar -xf run.tar`` (the members sit under ``run/``).
"""

from __future__ import annotations

import json
import shutil
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from model.net.checkpoint import half_checkpoint
from model.training.errors import UsageError
from model.training.hardware import hardware_description
from model.training.run import run_checkpoint

TAR, PART_BYTES, MIN_PART_MIB = "run.tar", 15 * 2**20, 1 / 16
RUN_FILES = ("train_log.csv", "valid_log.csv", "plot.png", "config.json")
DEVICE_FILE, PROPOSER_DIR = "device.json", "proposer"


# ---- there: pack ---------------------------------------------------------------------


def pack(
    run: Path, out: Path, info: dict[str, Any] | None = None, part_bytes: int = PART_BYTES
) -> tuple[list[Path], dict[str, Any]]:
    """Pack ``run`` (and ``run/proposer`` when it holds a checkpoint) into ``out``: the files
    written and the record (``device.json``); a run without a checkpoint packs its logs only."""
    stage = Path(tempfile.mkdtemp(prefix="pack-"))
    try:
        record: dict[str, Any] = {
            **(info or {}),
            "hardware": hardware_description(),
            "torch": torch.__version__,
            "packed_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        for name, src in (("model", run), (PROPOSER_DIR, run / PROPOSER_DIR)):
            dst = stage / "run" / ("" if name == "model" else PROPOSER_DIR)
            dst.mkdir(parents=True, exist_ok=True)
            try:
                ckpt = run_checkpoint(src)
            except UsageError:
                print(f"pack: no checkpoint in {src}", file=sys.stderr)
                ckpt = None
            if ckpt is not None:
                record[name] = half_checkpoint(ckpt, dst / "best.pt")
            for f in RUN_FILES:
                if (src / f).is_file():
                    shutil.copy2(src / f, dst / f)
        (stage / "run" / DEVICE_FILE).write_text(json.dumps(record, indent=1), encoding="utf-8")
        out.mkdir(parents=True, exist_ok=True)
        for old in [out / TAR, *out.glob(f"{TAR}.part-*")]:
            old.unlink(missing_ok=True)
        # built beside the stage, then cut into ``out``: a pack killed half-way never leaves
        # one whole tar over the device tool's 16 MiB in $OUT, only parts or nothing
        with tarfile.open(stage / TAR, "w") as tar:
            tar.add(stage / "run", arcname="run")
        return split(stage / TAR, part_bytes, out), record
    finally:
        shutil.rmtree(stage, ignore_errors=True)


def split(path: Path, part_bytes: int, out: Path) -> list[Path]:
    """Move ``path`` into ``out``, cut into ``out/<name>.part-000``... of ``part_bytes`` when it
    is larger (``cat`` joins them)."""
    if path.stat().st_size <= part_bytes:
        return [Path(shutil.move(path, out / path.name))]
    parts: list[Path] = []
    with open(path, "rb") as f:
        while chunk := f.read(part_bytes):
            part = out / f"{path.name}.part-{len(parts):03d}"
            part.write_bytes(chunk)
            parts.append(part)
    path.unlink()
    return parts


# ---- here: unpack and finish ---------------------------------------------------------


def is_packed(folder: Path) -> bool:
    return (folder / TAR).is_file() or any(folder.glob(f"{TAR}.part-*"))


def unpack(folder: Path, into: Path) -> Path:
    """Join ``folder``'s parts and extract them into ``into``; returns the run folder."""
    if into.exists() and any(into.iterdir()):
        again = f"; or finish the run unpacked there: python -m model.ship finish {into / 'run'}"
        unpacked = (into / "run").is_dir()  # a rerun after a finish that failed later
        raise UsageError(f"{into} is not empty; name another folder with --into" + again * unpacked)
    parts = sorted(folder.glob(f"{TAR}.part-*")) or [folder / TAR]
    into.mkdir(parents=True, exist_ok=True)
    joined = into / TAR
    try:
        with open(joined, "wb") as f:
            for part in parts:
                with open(part, "rb") as p:
                    shutil.copyfileobj(p, f)
        with tarfile.open(joined) as tar:
            tar.extractall(into, filter="data")
    except tarfile.TarError as e:  # a part missing or cut short: nothing half-unpacked is left
        shutil.rmtree(into, ignore_errors=True)
        names = ", ".join(p.name for p in parts)
        first = str(e).splitlines()[0].rstrip(":")
        raise UsageError(f"{folder}: {names} is not a whole `model.ship pack` archive ({first})") from e
    joined.unlink()
    return into / "run"
