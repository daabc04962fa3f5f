"""After training: evaluate the model on the test set, export the bundle, write its card, and
with ``--ship`` install it as ``models/default``; for a run trained here (``finish``, called
by ``python -m model.train``) or packed on a lent GPU machine (``finish_run``, called by
``python -m model.ship finish``)."""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from data.banners import BANNERS_FILE
from data.pairing import PairingTable
from data.paths import corpus_dir, default_model_dir, work_dir
from data.sensitive import ALLOW_LIST, SensitiveFilter, hash_words, normalised, read_words
from data.vocab import Vocab
from model.decoding.blocked import BlockedWords
from model.decoding.options import DecodeOptions
from model.net.checkpoint import load_checkpoint, load_model
from model.release.card import write_card
from model.release.eval_files import evaluate_files
from model.release.eval_tables import with_ci
from model.release.export import export_bundle
from model.release.metrics import BLEU_ORDERS
from model.release.rerank import make_reranker
from model.store.layout import install_bundle
from model.training.errors import UsageError
from model.training.pack import DEVICE_FILE, PROPOSER_DIR, is_packed, unpack
from model.training.pairs import load_data
from model.training.presets import load_preset
from model.training.run import REVERSE_DIR, load_proposer, run_checkpoint


@dataclass(frozen=True)
class SensitiveTables:
    """The corpus's sensitive-word list as a bundle carries it: hashed, with its longest
    word's length, and, less what the allow-list switches off, as the search's table."""

    hashes: np.ndarray | None = None
    longest: int | None = None
    blocked: BlockedWords | None = None


def sensitive_tables(pieces: list[str]) -> SensitiveTables:
    """The list read once, as the data stage reads it (``read_words``), in the ids of
    ``pieces``; empty without the list."""
    path = corpus_dir() / "badwords.txt"
    if not path.exists():
        return SensitiveTables()
    words = read_words(path)
    norm = normalised(words)
    return SensitiveTables(
        hash_words(norm, normalise=False),
        max((len(w) for w in norm), default=0),
        BlockedWords.from_words(SensitiveFilter(words, read_words(ALLOW_LIST)).words(), pieces),
    )


@dataclass(frozen=True)
class FinishSpec:
    """What finishing a run does, after training (``python -m model.train``) or for a run
    packed on a lent GPU machine (``python -m model.ship finish``)."""

    preset: str  # the preset's name, recorded in the bundle
    no_eval: bool = False  # bundle without the test-set figures
    eval_limit: int | None = None  # the first N test pairs only (None: the preset's eval_limit)
    no_export: bool = False  # evaluate only
    ship: bool = False  # also install the bundle as models/default
    hardware: str | None = None  # what it trained on, for the card (None: this machine)
    no_reranker: bool = False  # bundle without the reranker even where the preset has one


def finish(
    spec: FinishSpec,
    out: Path,
    folder: Path,
    train_pairs: list[tuple[str, str]],
    preset: dict[str, Any],
    proposer_path: Path | None = None,
    reverse_path: Path | None = None,
) -> None:
    """Evaluate the run in ``out`` on ``folder``'s test set, export its bundle with the
    training pairs it was trained on (``train_pairs``: the training-set index and the known
    lower lines) and the lower_to_upper model of ``reverse_path`` (a run folder), write the
    card and, with ``spec.ship``, install it."""
    model, vocab, meta = load_model(run_checkpoint(out))
    reverse, reverse_meta = None, None
    if reverse_path is not None:
        reverse, reverse_vocab, reverse_meta = load_model(run_checkpoint(reverse_path))
        if reverse_vocab.pieces != vocab.pieces:
            raise UsageError(f"{reverse_path}: its vocabulary differs from the model's")
    proposer, proposer_meta = (None, None) if proposer_path is None else load_proposer(proposer_path, vocab)
    ev: dict[str, Any] = {}
    pairing = PairingTable.count(train_pairs)  # the search's pairing table, as the bundle will carry it
    if not spec.no_eval:
        limit = spec.eval_limit if spec.eval_limit is not None else preset.get("eval_limit", 0)
        lowers = [lo for _, lo in train_pairs]
        try:
            ev = evaluate_files(
                model,
                vocab,
                folder,
                limit=limit or None,
                train_lowers=lowers,
                proposer=proposer,
                pairing=pairing,
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
                        pairing=pairing,
                        desc="decoding the test set, fast mode",
                    )
                    ev["fast_mode"] = fast["summary"]
                except Exception as e:
                    print(f"warning: fast-mode evaluation failed ({type(e).__name__}: {e})")
            (out / "eval.json").write_text(json.dumps(ev, ensure_ascii=False, indent=1), encoding="utf-8")
    plot = out / "plot.png"
    if spec.no_export:
        print(headline(spec.preset, ev, None, plot, spec.no_eval))
        return
    data_card, report = folder / "DATA_CARD.md", folder / "report.json"
    sensitive = sensitive_tables(vocab.pieces)
    bundle = export_bundle(
        out / "bundle",
        model,
        vocab,
        train_pairs=train_pairs,
        pairing=pairing,
        banners=folder / BANNERS_FILE if (folder / BANNERS_FILE).is_file() else None,
        sensitive_hashes=sensitive.hashes,
        sensitive_max_len=sensitive.longest,
        blocked=sensitive.blocked,
        data_card=data_card.read_text("utf-8") if data_card.exists() else "",
        data_report=json.loads(report.read_text("utf-8")) if report.exists() else None,
        eval_result=ev,
        step=meta.get("step", 0),
        best_valid=meta.get("best_valid"),
        preset=spec.preset,
        proposer=proposer,
        proposer_meta=proposer_meta,
        reverse=reverse,  # checked by export_bundle: a lower_to_upper encoder-decoder
        reverse_meta=reverse_meta,
    )
    reranker = preset.get("reranker")
    if reranker and not spec.no_reranker:
        make_reranker(bundle, folder, out / "reranker", reranker, log=lambda line: print(line, flush=True))
    write_card(bundle, out, report, hardware=spec.hardware)
    shipped = install_bundle(bundle, default_model_dir()) if spec.ship else None
    print(headline(spec.preset, ev, bundle, plot, spec.no_eval, shipped))


def headline(
    preset: str,
    ev: dict[str, Any],
    bundle: Path | None,
    plot: Path,
    no_eval: bool = False,
    shipped: Path | None = None,
) -> str:
    """What `make train` prints last: the test set's perplexity and BLEU-1/2/4 with their 95%
    intervals (the full test set and its leak-free part), and where the bundle, its card and
    the training plot are."""
    lines = [f"== make train: preset {preset} done =="]
    splits = [(name, ev[key]) for key, name in (("full", "full"), ("leakfree", "leak-free")) if key in ev]
    if not splits:
        why = "--no-eval" if no_eval else "the evaluation failed, see above"
        lines.append(f"test set: no figures ({why})")
    for name, figures in splits:
        bleu = " / ".join(with_ci(figures, f"bleu{n}") for n in BLEU_ORDERS)
        lines.append(
            f"test set, {name} ({figures['pairs']:,} pairs): perplexity {figures['perplexity']}, "
            f"BLEU-1/2/4 {bleu}"
        )
    if any(f"bleu{n}_ci95" in figures for _, figures in splits for n in BLEU_ORDERS):
        lines.append("(± is half the width of BLEU's 95% bootstrap interval)")
    if bundle is None:
        lines.append("bundle: none (--no-export)")
    else:
        size = sum(p.stat().st_size for p in bundle.iterdir() if p.is_file()) / 1e6
        over = " (over the 40 MB budget!)" if size > 40 else ""
        lines += [f"bundle: {bundle} ({size:.1f} MB{over})", f"card:   {bundle / 'MODEL_CARD.md'}"]
    lines.append(f"plot:   {plot}" if plot.is_file() else "plot:   none (no training log)")
    if shipped is not None:
        lines.append(f"shipped to {shipped}")
    return "\n".join(lines)


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
    if not vocab.same_as(Vocab(ckpt["vocab"])):
        raise UsageError(f"{folder}/spm.model is not the vocabulary {run} was trained with")
    proposer: Path | None = None
    if args.proposer is not None:
        proposer = Path(args.proposer)
    elif not args.no_proposer and ((run / PROPOSER_DIR / "best.pt").is_file()):
        proposer = run / PROPOSER_DIR
    reverse = run / REVERSE_DIR if (run / REVERSE_DIR / "best.pt").is_file() else None
    # the card names the machine the run trained on, recorded when it was packed
    hardware = info.get("hardware") or None
    spec = FinishSpec(
        preset_name, args.no_eval, args.eval_limit, hardware=hardware, no_reranker=args.no_reranker
    )
    finish(spec, run, folder, train.pairs, preset, proposer, reverse)
    bundle = run / "bundle"
    size = sum(p.stat().st_size for p in bundle.iterdir() if p.is_file()) / 1e6
    print(f"bundle {bundle}: {size:.2f} MB" + (" (over the 40 MB budget!)" if size > 40 else ""))
    if args.ship:
        print(f"shipped to {install_bundle(bundle, default_model_dir())}")
    return bundle
