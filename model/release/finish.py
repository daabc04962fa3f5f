"""After training: evaluate the model on the test set, export the bundle, write its card, and
with ``--ship`` install it as ``models/default``; for a run trained here (``finish``, called
by ``python -m model.train``) or packed on a lent GPU machine (``finish_run``, called by
``python -m model.ship finish``)."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from data.paths import corpus_dir, default_model_dir, work_dir
from data.sensitive import hash_words, normalised
from model.decoding.options import DecodeOptions
from model.net.checkpoint import load_checkpoint, load_model
from model.release.bundle import export_bundle, install_bundle
from model.release.card import main as card_main
from model.release.card import write_card
from model.release.evaluate import evaluate_files
from model.training.errors import UsageError
from model.training.pack import DEVICE_FILE, PROPOSER_DIR, is_packed, unpack
from model.training.pairs import PairData, load_data
from model.training.presets import load_preset
from model.training.run import load_proposer, run_checkpoint


def sensitive_hashes() -> tuple[np.ndarray | None, int | None]:
    """The corpus's sensitive-word list, hashed, and its longest word's length (None, None
    without the list)."""
    path = corpus_dir() / "badwords.txt"
    if not path.exists():
        return None, None
    words = [w.strip() for w in path.read_text(encoding="utf-8").splitlines() if w.strip()]
    longest = max((len(w) for w in normalised(words)), default=0)
    return np.asarray(hash_words(words), dtype=np.uint64), longest


def finish(
    args: argparse.Namespace,
    out: Path,
    folder: Path,
    train: PairData,
    preset: dict[str, Any],
    proposer_path: Path | None = None,
) -> None:
    model, vocab, meta = load_model(run_checkpoint(out))
    proposer = load_proposer(proposer_path, vocab) if proposer_path is not None else None
    ev: dict[str, Any] = {}
    if not args.no_eval:
        limit = args.eval_limit if args.eval_limit is not None else preset.get("eval_limit", 0)
        lowers = [lo for _, lo in train.pairs]
        try:
            ev = evaluate_files(
                model, vocab, folder, limit=limit or None, train_lowers=lowers, proposer=proposer
            )
        except Exception as e:  # a failing evaluation must not cost the trained model its bundle
            print(f"warning: evaluation failed ({type(e).__name__}: {e}); exporting without figures")
        else:
            if proposer is not None:  # the fast mode's figures beside the default's
                try:
                    fast = evaluate_files(
                        model,
                        vocab,
                        folder,
                        limit or None,
                        lowers,
                        DecodeOptions(fast=True),
                        proposer=proposer,
                    )
                    ev["fast_mode"] = fast["summary"]
                except Exception as e:
                    print(f"warning: fast-mode evaluation failed ({type(e).__name__}: {e})")
            (out / "eval.json").write_text(json.dumps(ev, ensure_ascii=False, indent=1), encoding="utf-8")
    if args.no_export:
        return
    data_card, report = folder / "DATA_CARD.md", folder / "report.json"
    hashes, longest = sensitive_hashes()
    bundle = export_bundle(
        out / "bundle",
        model,
        vocab,
        train_pairs=train.pairs,
        sensitive_hashes=hashes,
        sensitive_max_len=longest,
        data_card=data_card.read_text("utf-8") if data_card.exists() else "",
        data_report=json.loads(report.read_text("utf-8")) if report.exists() else None,
        eval_result=ev,
        step=meta.get("step", 0),
        best_valid=meta.get("best_valid"),
        preset=args.preset,
        proposer=proposer,
        proposer_meta=load_model(run_checkpoint(proposer_path))[2] if proposer_path is not None else None,
    )
    write_card(bundle, out, report)
    print(f"bundle written to {bundle} ({sum(p.stat().st_size for p in bundle.iterdir()) / 2**20:.1f} MiB)")
    if args.ship:
        print(f"shipped to {install_bundle(bundle, default_model_dir())}")


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
