"""A run trained on another machine (a lent GPU machine): packed there, evaluated and bundled here.

    python3 -m model.ship pack RUN OUT [--preset gpu]          # there (scripts/device_train.sh)
    python -m model.ship finish DIR [--data-dir .carry/data] [--ship]   # here (scripts/device_finish.sh)

``pack`` keeps what finishing needs and drops the rest: the best checkpoint of RUN and of its
proposer (``RUN/proposer``) as fp16 weight-only checkpoints (no optimizer state), their
logs, plots and configs, and ``device.json`` (preset, hardware, versions). It writes them as
one tar file, ``OUT/run.tar``, cut into ``OUT/run.tar.part-000``, ``-001``, ... of 15 MiB when
larger, because the device tool returns at most 8 files of at most 16 MiB each. To join by
hand: ``cat run.tar.part-* > run.tar && tar -xf run.tar`` (the members sit under ``run/``).

``finish`` takes such a folder (or an unpacked run folder), unpacks it into ``--into``
(default ``work/device/<time>``), evaluates the model on the test set with its proposer,
exports the bundle into ``<run>/bundle``, writes its card (with the recorded hardware) and,
with ``--ship``, installs it as ``models/default``. It reuses model.train's ``finish``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from data.paths import default_model_dir, work_dir
from data.vocab import Vocab
from model.bundle import install_bundle
from model.card import hardware_description
from model.card import main as card_main
from model.checkpoint import atomic_save, load_checkpoint, make_checkpoint, model_from_checkpoint
from model.train import UsageError, finish, load_data, load_preset, run_checkpoint

TAR, PART_BYTES, MIN_PART_MIB = "run.tar", 15 * 2**20, 1 / 16
RUN_FILES = ("train_log.csv", "valid_log.csv", "plot.png", "config.json")
DEVICE_FILE, PROPOSER_DIR = "device.json", "proposer"


# ---- there: pack ---------------------------------------------------------------------


def half_checkpoint(src: Path, dst: Path) -> dict[str, Any]:
    """``src`` (any checkpoint) as an fp16 weight-only checkpoint at ``dst``; returns its meta."""
    ckpt = load_checkpoint(src)
    model = model_from_checkpoint(ckpt)
    meta = {"step": ckpt.get("step", 0), "best_valid": ckpt.get("best_valid")}
    atomic_save(make_checkpoint(model, Vocab(ckpt["vocab"]), half=True, **meta), dst)
    return {**meta, "source": src.name, "parameters": model.num_parameters()}


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


def finish_run(args: argparse.Namespace) -> Path:
    """Evaluate and bundle a run; the bundle folder."""
    src = Path(args.run)
    if is_packed(src):
        into = args.into or work_dir() / "device" / time.strftime("%Y%m%d-%H%M%S")
        run = unpack(src, Path(into))
        print(f"unpacked {src} into {run}")
    else:
        run = src
    info = json.loads((run / DEVICE_FILE).read_text("utf-8")) if (run / DEVICE_FILE).is_file() else {}
    preset_name = args.preset or info.get("preset") or "gpu"
    preset = load_preset(preset_name, [])
    ckpt = load_checkpoint(run_checkpoint(run))
    folder = Path(args.data_dir)
    max_len = int(ckpt["model_config"].get("max_len", 64))
    vocab, train, _ = load_data(folder, max_len, 4096)
    if vocab.to_bytes() != ckpt["vocab"]:
        raise UsageError(f"{folder}/spm.model is not the vocabulary {run} was trained with")
    proposer: Path | None = None
    if args.proposer is not None:
        proposer = Path(args.proposer)
    elif not args.no_proposer and ((run / PROPOSER_DIR / "best.pt").is_file()):
        proposer = run / PROPOSER_DIR
    ns = argparse.Namespace(
        no_eval=args.no_eval, eval_limit=args.eval_limit, no_export=False, preset=preset_name, ship=False
    )
    finish(ns, run, folder, train, preset, proposer)
    bundle = run / "bundle"
    if info.get("hardware"):  # the card was written with this machine's hardware: name the trainer's
        card_main([str(bundle), "--train-dir", str(run), "--report", str(folder / "report.json"),
                   "--hardware", str(info["hardware"])])  # fmt: skip
    size = sum(p.stat().st_size for p in bundle.iterdir() if p.is_file()) / 1e6
    print(f"bundle {bundle}: {size:.2f} MB" + (" (over the 40 MB budget!)" if size > 40 else ""))
    if args.ship:
        print(f"shipped to {install_bundle(bundle, default_model_dir())}")
    return bundle


# ---- main ----------------------------------------------------------------------------


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m model.ship", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    sub = p.add_subparsers(dest="command", required=True)
    pk = sub.add_parser("pack", help="there: fp16 checkpoints and logs of a run into OUT, in ≤ 15 MiB parts")
    pk.add_argument("run", type=Path, help="the run folder (--out of model.train)")
    pk.add_argument("out", type=Path, help="the folder that comes back ($OUT)")
    pk.add_argument("--preset", help="the preset the run was trained with (recorded in device.json)")
    pk.add_argument("--part-mib", type=float, default=PART_BYTES / 2**20, help="largest part (default 15)")
    pk.add_argument(
        "--note", action="append", default=[], metavar="KEY=VALUE", help="recorded in device.json"
    )
    fi = sub.add_parser("finish", help="here: unpack, evaluate, bundle (and --ship) a packed run")
    fi.add_argument("run", type=Path, help="the folder holding run.tar or its parts, or a run folder")
    fi.add_argument("--into", type=Path, help="unpack here (default work/device/<time>)")
    fi.add_argument("--data-dir", type=Path, default=Path(".carry/data"), help="the data the run trained on")
    fi.add_argument("--preset", help="the run's preset (default: recorded in device.json, else gpu)")
    fi.add_argument("--proposer", type=Path, help="bundle this tagger (default: the run's proposer/)")
    fi.add_argument("--no-proposer", action="store_true", help="bundle no proposer")
    fi.add_argument("--eval-limit", type=int, help="evaluate on the first N test pairs only")
    fi.add_argument("--no-eval", action="store_true", help="bundle without the test-set figures")
    fi.add_argument("--ship", action="store_true", help="also install the bundle as models/default")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        if args.command == "pack":
            notes = dict(n.partition("=")[::2] for n in args.note)
            if not args.part_mib >= MIN_PART_MIB:  # 0 made parts of one byte: a million files
                raise UsageError(f"--part-mib must be at least {MIN_PART_MIB} (64 KiB), got {args.part_mib}")
            if not args.run.is_dir():
                raise UsageError(f"{args.run}: no such run folder")
            part = int(args.part_mib * 2**20)
            files, record = pack(args.run, args.out, {"preset": args.preset, **notes}, part)
            for f in files:
                print(f"packed {f} ({f.stat().st_size / 2**20:.1f} MiB)")
            if "model" not in record:
                print(f"error: no checkpoint in {args.run}: packed its logs only", file=sys.stderr)
                return 1
        else:
            finish_run(args)
    except (UsageError, OSError, ValueError, tarfile.TarError) as e:  # ValueError: not a checkpoint
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
