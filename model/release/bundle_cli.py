"""``python -m model.bundle``: write or check a bundle's SHA256SUMS, add a reverse model
to it, rewrite its weights in int8, give its model back as a training checkpoint, or slim a
training checkpoint to commit it."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from model.net.checkpoint import half_checkpoint
from model.release.export import add_reverse, export_checkpoint, quantize_bundle
from model.store.layout import (
    MANIFEST_FILE,
    ROLES,
    BundleError,
    has_model,
    missing_model,
    read_manifest,
    verify_bundle,
    write_manifest,
)
from model.store.weights import WEIGHT_DTYPES


def _size(root: Path) -> float:
    return sum(f.stat().st_size for f in root.iterdir() if f.is_file()) / 1e6


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m model.bundle",
        description="write or check a bundle's SHA256SUMS, add a reverse model, rewrite its weights "
        "in another dtype, export its model as a training checkpoint, or slim a training checkpoint",
    )
    action = p.add_mutually_exclusive_group(required=True)
    action.add_argument("--write-manifest", type=Path, metavar="DIR", help="write DIR/SHA256SUMS")
    action.add_argument("--check", type=Path, metavar="DIR", help="check DIR's files against it")
    action.add_argument(
        "--add-reverse",
        type=Path,
        metavar="DIR",
        help="put the lower_to_upper model of --checkpoint into DIR (下联求上联; trained with DIR's model's "
        "embeddings frozen) and rewrite SHA256SUMS",
    )
    action.add_argument(
        "--quantize",
        type=Path,
        metavar="DIR",
        help="rewrite DIR's models' weights in --dtype (int8: one scale per row, about half the size "
        "of fp16) and rewrite SHA256SUMS",
    )
    action.add_argument(
        "--export-checkpoint",
        type=Path,
        metavar="DIR",
        help="write DIR's model of --role as a training checkpoint to --out, to train it further "
        "(python -m model.train --init-from OUT) or learn from it (--teacher OUT)",
    )
    action.add_argument(
        "--slim",
        type=Path,
        metavar="CKPT",
        help="write the training checkpoint CKPT's weights in fp16, without the optimizer's state, "
        "to --out: small enough to commit; training goes on from it with --init-from OUT",
    )
    p.add_argument(
        "--checkpoint", type=Path, help="with --add-reverse: the reverse run's checkpoint (best.pt)"
    )
    p.add_argument(
        "--dtype", choices=WEIGHT_DTYPES, default="int8", help="with --quantize: the weights' dtype"
    )
    p.add_argument("--role", choices=ROLES, default="model", help="with --export-checkpoint: which model")
    p.add_argument("--out", type=Path, help="with --export-checkpoint or --slim: the file to write")
    return p


def _run(step: Callable[[], str]) -> int:
    try:
        print(step())
    except (BundleError, OSError, ValueError, KeyError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


def _slim(src: Path, out: Path | None) -> int:
    if out is None:
        print("error: --slim needs --out (the checkpoint file to write)", file=sys.stderr)
        return 2
    if out.resolve() == src.resolve():
        print(f"error: --out {out} is the checkpoint itself; write the slim copy elsewhere", file=sys.stderr)
        return 2

    def slimmed() -> str:
        half_checkpoint(src, out)
        before, after = src.stat().st_size / 1e6, out.stat().st_size / 1e6
        return f"wrote {out} ({after:.2f} MB, was {before:.2f}): go on with --init-from {out}"

    return _run(slimmed)


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.slim:
        return _slim(args.slim, args.out)
    chosen = (args.write_manifest, args.check, args.add_reverse, args.quantize, args.export_checkpoint)
    root: Path = next(p for p in chosen if p is not None)
    if not has_model(root):
        print(f"error: {missing_model(root)}", file=sys.stderr)
        return 2
    if args.add_reverse:
        if args.checkpoint is None:
            print("error: --add-reverse needs --checkpoint (the reverse run's best.pt)", file=sys.stderr)
            return 2

        def added() -> str:
            weights = add_reverse(root, args.checkpoint)
            size = weights.stat().st_size / 1e6
            return f"wrote {weights} ({size:.2f} MB); the bundle is {_size(root):.2f} MB"

        return _run(added)
    if args.export_checkpoint:
        if args.out is None:
            print("error: --export-checkpoint needs --out (the checkpoint file to write)", file=sys.stderr)
            return 2
        return _run(
            lambda: (
                f"wrote {export_checkpoint(root, args.role, args.out)}: the {args.role} of {root} "
                "as a training checkpoint"
            )
        )
    if args.quantize:
        before = _size(root)

        def quantized() -> str:
            written = quantize_bundle(root, args.dtype)
            names = ", ".join(written)
            return f"rewrote {names} in {args.dtype}: the bundle is {_size(root):.2f} MB (was {before:.2f})"

        return _run(quantized)
    if args.write_manifest:
        path = write_manifest(root)
        print(f"wrote {path} ({len(read_manifest(root) or {})} files)")
        return 0
    if not (root / MANIFEST_FILE).is_file():
        print(f"error: {root} has no {MANIFEST_FILE} (write it with --write-manifest)", file=sys.stderr)
        return 1
    return _run(lambda: (verify_bundle(root), f"{root}: every file matches {MANIFEST_FILE}")[1])


if __name__ == "__main__":
    sys.exit(main())
