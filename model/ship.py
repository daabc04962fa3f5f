"""A run trained on another machine (a lent GPU machine): packed there, evaluated and bundled here.

    python3 -m model.ship pack RUN OUT [--preset gpu]          # there (scripts/device_train.sh)
    python -m model.ship finish DIR [--data-dir .carry/data] [--ship]   # here (scripts/device_finish.sh)

``pack``: model/training/pack.py says what it keeps and how the parts are joined by hand.

``finish`` takes such a folder (or an unpacked run folder), unpacks it into ``--into``
(default ``work/device/<time>``), evaluates the model on the test set with its proposer,
exports the bundle into ``<run>/bundle``, writes its card (with the recorded hardware) and,
with ``--ship``, installs it as ``models/default``. The packing is model.training.pack (no
pypinyin, no pyahocorasick: it runs on the device image); the finishing is
model.release.finish.finish_run, imported only for ``finish``.
"""

from __future__ import annotations

import argparse
import sys
import tarfile
from pathlib import Path

from model.training.errors import UsageError
from model.training.pack import MIN_PART_MIB, PART_BYTES, pack


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
    fi.add_argument("--no-reranker", action="store_true", help="make no reranker for the bundle")
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
            # optional dependencies (pypinyin, pyahocorasick), not a circle: see the docstring
            from model.release.finish import finish_run

            finish_run(args)
    except (UsageError, OSError, ValueError, tarfile.TarError) as e:  # ValueError: not a checkpoint
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
