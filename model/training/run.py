"""`make train`: data stage (if stale) → training → evaluation → model bundle.

    python -m model.train --preset {tiny,cpu,gpu} [--max-minutes M] [--set lr=1e-3 --set model.d_model=256]
    torchrun --nproc_per_node=2 -m model.train --preset tiny      # DDP (gloo on CPU, NCCL on CUDA)

Run again with the same command after an interruption and it resumes from the newest
checkpoint in ``--out`` (default ``work/train/<preset>``). The bundle goes to
``<out>/bundle``; ``--ship`` also installs it as ``models/default``.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Any

import numpy as np
import sacrebleu
import torch
import torch.distributed as dist

from data.paths import data_dir, work_dir
from data.vocab import Vocab
from model.net.checkpoint import CoupletModel, build_model, load_model, load_proposer_and_meta, save
from model.net.tagger import CoupletTagger
from model.net.transformer import ModelConfig
from model.training.config import Dist, Hooks, TrainConfig
from model.training.errors import UsageError
from model.training.greedy import greedy
from model.training.hardware import describe, fit_batch, pick_device, setup_cpu
from model.training.pairs import PairData, load_data, run_data_stage
from model.training.presets import load_preset
from model.training.scoring import mean_nll
from model.training.trainer import Trainer


@dataclass(frozen=True)
class TrainSpec:
    """What ``python -m model.train`` is asked for (its command-line options, typed)."""

    preset: str = "cpu"
    data_dir: Path | None = None
    out: Path | None = None
    max_minutes: float | None = None
    max_steps: int | None = None
    seed: int | None = None
    set: tuple[str, ...] = ()
    device: str = "auto"
    skip_data: bool = False
    no_eval: bool = False
    no_export: bool = False
    eval_limit: int | None = None
    ship: bool = False
    proposer: Path | None = None
    no_proposer: bool = False
    init_from: Path | None = None
    teacher: Path | None = None
    no_reverse: bool = False
    no_reranker: bool = False

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> TrainSpec:
        return cls(**{f.name: getattr(args, f.name) for f in fields(cls)} | {"set": tuple(args.set)})


@dataclass
class Trained:
    """What a finished run hands to the release steps (model.release.finish): its folder, the
    data folder, the training pairs, the preset and the proposer to bundle."""

    out: Path
    folder: Path
    train: PairData
    preset: dict[str, Any]
    proposer_path: Path | None
    reverse_path: Path | None = None  # the lower_to_upper model's run folder, when one was trained


# ---- validation hook -----------------------------------------------------------------


def make_evaluator(valid: PairData, vocab: Vocab, n_loss: int, n_bleu: int, seed: int) -> Any:
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(valid)).tolist()
    loss_batches = valid.fixed_batches(order[:n_loss])
    sample = [valid.pairs[i] for i in order[:n_bleu]]

    def evaluate(model: CoupletModel) -> dict[str, float]:
        loss = mean_nll(model, loss_batches)
        hyps = greedy(model, vocab, [u for u, _ in sample])
        bleu = sacrebleu.corpus_bleu(hyps, [[lo for _, lo in sample]], tokenize="zh").score
        return {
            "valid_loss": round(loss, 4),
            "valid_ppl": round(math.exp(loss), 2),
            "valid_bleu": round(bleu, 2),
        }

    return evaluate


# ---- after training ------------------------------------------------------------------


def plot(out: Path) -> Path | None:
    """PNG of training/validation loss and validation BLEU against minutes."""
    from matplotlib.figure import Figure  # here: plotting alone needs it (half a second to import)

    def rows(name: str) -> list[dict[str, str]]:
        p = out / name
        return list(csv.DictReader(open(p, encoding="utf-8"))) if p.exists() else []

    tr, va = rows("train_log.csv"), rows("valid_log.csv")
    if not tr and not va:
        return None
    fig = Figure(figsize=(11, 4))
    ax1, ax2 = fig.subplots(1, 2)
    ax1.plot(
        [float(r["minutes"]) for r in tr], [float(r["train_loss"]) for r in tr], label="train (smoothed CE)"
    )
    ax1.plot(
        [float(r["minutes"]) for r in va], [float(r["valid_loss"]) for r in va], "o-", label="valid NLL/char"
    )
    ax1.set(xlabel="minutes", ylabel="loss", title="loss")
    ax1.legend()
    ax2.plot([float(r["minutes"]) for r in va], [float(r["valid_bleu"]) for r in va], "o-", color="C2")
    ax2.set(xlabel="minutes", ylabel="BLEU-4 (greedy, sample)", title="validation BLEU")
    fig.tight_layout()
    fig.savefig(out / "plot.png", dpi=100)
    return out / "plot.png"


def run_checkpoint(path: Path) -> Path:
    """A run folder's best checkpoint (else its newest), or ``path`` itself if it is a file."""
    if path.is_file():
        return path
    if not path.exists():
        raise UsageError(f"{path}: no such file or folder")
    best = path / "best.pt"
    found = [best] if best.exists() else sorted((path / "checkpoints").glob("step-*.pt"))[-1:]
    if not found:
        raise UsageError(f"no checkpoint in {path}")
    return found[0]


def load_checked(path: Path, flag: str) -> tuple[CoupletModel, Vocab, dict[str, Any]]:
    """``load_model``, a file that is not a checkpoint refused as a usage error."""
    try:
        return load_model(path)
    except ValueError as e:
        raise UsageError(f"{flag} {e}") from e


def load_teacher(path: Path, vocab: Vocab, kind: str) -> CoupletModel:
    """The model to distil from: a run folder's best checkpoint (or a checkpoint file) of the
    same kind as the one trained, on the same vocabulary."""
    teacher, its_vocab, _ = load_checked(run_checkpoint(path), "--teacher")
    if its_vocab.pieces != vocab.pieces:
        raise UsageError(f"--teacher {path}: its vocabulary differs from the training data's")
    if teacher.cfg.kind != kind:
        raise UsageError(f"--teacher {path}: a {teacher.cfg.kind} model cannot teach a {kind} model")
    return teacher


def warm_start(model: torch.nn.Module, path: Path, vocab: Vocab) -> tuple[int, list[str]]:
    """Copy into ``model`` every tensor of the checkpoint at ``path`` (or a run folder's best)
    that has the same name and shape, e.g. the embeddings, the encoder and the first decoder
    layer of a deeper model into one with a single decoder layer -> how many tensors were
    copied, and the names of those left as initialised."""
    source, source_vocab, _ = load_checked(run_checkpoint(path), "--init-from")
    if source_vocab.pieces != vocab.pieces:
        raise UsageError(f"--init-from {path}: its vocabulary differs from the training data's")
    theirs = source.state_dict()
    fresh = []
    with torch.no_grad():
        for name, tensor in model.state_dict().items():
            if name in theirs and theirs[name].shape == tensor.shape:
                tensor.copy_(theirs[name])
            else:
                fresh.append(name)
    return len(model.state_dict()) - len(fresh), fresh


def load_proposer(path: Path, vocab: Vocab) -> tuple[CoupletTagger, dict[str, Any]]:
    """The proposer of a run folder's best checkpoint (or a checkpoint file), and its
    checkpoint's step and best_valid (``model.net.checkpoint.load_proposer_and_meta``)."""
    try:
        return load_proposer_and_meta(run_checkpoint(path), vocab)
    except ValueError as e:
        raise UsageError(str(e)) from e


def train_proposer(spec: TrainSpec, d: Dist, preset: dict[str, Any], out: Path) -> Path | None:
    """The proposer to bundle: ``--proposer``, else the preset's ``proposer`` preset trained
    first into ``<out>/proposer`` (resuming like any run), else none."""
    if spec.proposer is not None:
        return Path(spec.proposer)
    name = preset.get("proposer")
    if not name or spec.no_proposer or preset["model"].get("kind", "seq2seq") != "seq2seq":
        return None
    sub = replace(
        spec, preset=name, out=out / "proposer", set=(), max_minutes=None, max_steps=None, no_export=True,
        no_eval=True, skip_data=True, ship=False, proposer=None, no_proposer=True,
    )  # fmt: skip
    if d.main:
        print(f"proposer: training the {name!r} preset first, into {sub.out}", flush=True)
    train(sub, d)
    return sub.out


REVERSE_DIR = "reverse"  # the lower_to_upper model's run, inside the model's run folder


def reverse_overrides(preset: dict[str, Any]) -> list[str]:
    """The ``--set`` options of a preset's lower_to_upper run: its ``reverse`` section's training
    options, the model's shape with the direction swapped, the embeddings frozen (shared)."""
    section = preset.get("reverse")
    if not isinstance(section, dict):
        raise UsageError("the preset's 'reverse' section must be a mapping of training options")
    base = ['model.direction="lower_to_upper"', "freeze_embeddings=true"]
    return base + [f"{k}={json.dumps(v)}" for k, v in section.items()]


def train_reverse(spec: TrainSpec, d: Dist, preset: dict[str, Any], out: Path) -> Path | None:
    """The lower_to_upper model (下联求上联) to bundle beside the model: when the preset has a
    ``reverse`` section, the same pairs with the direction swapped, trained into
    ``<out>/reverse`` from the model's best weights with its character embeddings frozen (the
    bundle stores them once); resumes like any run. None without the section, with
    ``--no-reverse`` or ``--no-export`` (no bundle to put it in), for a model that is not an
    upper_to_lower encoder-decoder, or under DDP."""
    model_opts = preset["model"]
    if (
        "reverse" not in preset
        or spec.no_reverse
        or spec.no_export
        or model_opts.get("kind", "seq2seq") != "seq2seq"
        or model_opts.get("direction", "upper_to_lower") != "upper_to_lower"
    ):
        return None
    if d.world > 1:
        if d.main:
            print("reverse model: not trained under torchrun; run again without it to add it", flush=True)
        return None
    sub = replace(
        spec, out=out / REVERSE_DIR, set=(*spec.set, *reverse_overrides(preset)), max_minutes=None,
        max_steps=None, no_export=True, no_eval=True, skip_data=True, ship=False, proposer=None,
        no_proposer=True, no_reverse=True, init_from=out, teacher=None,
    )  # fmt: skip
    print(f"reverse model: training the lower_to_upper direction into {sub.out}", flush=True)
    train(sub, d)
    return sub.out


# ---- main ----------------------------------------------------------------------------


def parse_args(argv: list[str] | None) -> TrainSpec:
    p = argparse.ArgumentParser(prog="python -m model.train", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    p.add_argument("--preset", default="cpu", help="tiny, cpu or gpu (files in model/training/presets)")
    p.add_argument(
        "--data-dir", type=Path, help="folder with train.tsv, valid.tsv, spm.model (default work/data)"
    )
    p.add_argument("--out", type=Path, help="run folder (default work/train/<preset>)")
    p.add_argument("--max-minutes", type=float, help="wall-clock training budget, summed across resumes")
    p.add_argument("--max-steps", type=int)
    p.add_argument("--seed", type=int)
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a preset option")
    p.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    p.add_argument("--skip-data", action="store_true", help="do not run the data stage first")
    p.add_argument("--no-eval", action="store_true", help="skip the test-set evaluation after training")
    p.add_argument("--no-export", action="store_true", help="do not write the bundle")
    p.add_argument("--eval-limit", type=int, help="evaluate on the first N test pairs only")
    p.add_argument("--ship", action="store_true", help="also install the bundle as models/default")
    p.add_argument(
        "--proposer",
        type=Path,
        help="bundle this encoder-only tagger (checkpoint or run folder) as the decoder's proposer",
    )
    p.add_argument("--no-proposer", action="store_true", help="do not train or bundle the preset's proposer")
    p.add_argument(
        "--no-reverse",
        action="store_true",
        help="do not train or bundle the preset's lower_to_upper model (下联求上联; with --no-export it "
        "is not trained either)",
    )
    p.add_argument(
        "--no-reranker",
        action="store_true",
        help="do not make the preset's reranker (model/release/rerank.py) for the bundle",
    )
    p.add_argument(
        "--init-from",
        type=Path,
        help="start a fresh run from this checkpoint's (or run folder's) weights where names and shapes "
        "match, e.g. a shallower decoder from a trained model (same vocabulary)",
    )
    p.add_argument(
        "--teacher",
        type=Path,
        help="also learn this trained model's token distributions (knowledge distillation; a run folder "
        "or checkpoint of the same kind on the same vocabulary); distill_weight sets their share",
    )
    return TrainSpec.from_args(p.parse_args(argv))


def build(args: TrainSpec) -> tuple[dict[str, Any], TrainConfig]:
    preset = load_preset(args.preset, list(args.set))
    if args.eval_limit is not None and args.eval_limit < 0:
        raise UsageError("--eval-limit must be 0 (every test pair) or a number of pairs")
    train_opts = dict(preset["train"])
    for key in ("max_minutes", "max_steps", "seed"):
        if getattr(args, key) is not None:
            train_opts[key] = getattr(args, key)
    try:
        return preset, TrainConfig.from_dict(train_opts)
    except (TypeError, ValueError) as e:
        raise UsageError(str(e)) from e


def train(args: TrainSpec, d: Dist) -> Trained | None:
    """Train the run ``args`` asks for (its proposer first); what the release steps need, or
    None on a DDP rank (each rank saves its final weights beside the run)."""
    preset, tc = build(args)
    device = pick_device(d, args.device)
    setup_cpu(tc.threads)
    folder = args.data_dir or data_dir()
    if args.data_dir is None and not args.skip_data and d.main:
        run_data_stage()
    if d.world > 1:
        dist.barrier()
    out = args.out or work_dir() / "train" / args.preset
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UsageError(f"--out {out}: cannot make the run folder ({e})") from e
    proposer_path = train_proposer(args, d, preset, out)
    mcfg_opts = {k: v for k, v in preset["model"].items()}
    max_len = int(mcfg_opts.get("max_len", ModelConfig.max_len))
    reverse = mcfg_opts.get("direction") == "lower_to_upper"
    vocab, train_data, valid = load_data(folder, max_len, tc.batch_tokens, reverse)
    if proposer_path is not None:
        load_proposer(proposer_path, vocab)  # refuse a wrong one now, not after hours of training
    try:
        mcfg = ModelConfig(vocab_size=len(vocab), **mcfg_opts)
        torch.manual_seed(tc.seed)
        model = build_model(mcfg)
    except (TypeError, ValueError) as e:
        raise UsageError(f"bad model option: {e}") from e
    n_params = model.num_parameters()
    tc.batch_tokens = fit_batch(mcfg, n_params, tc, device)
    train_data.batch_tokens = tc.batch_tokens
    if d.main:
        print(describe(mcfg, n_params, tc, device), flush=True)
        print(
            f"data: {len(train_data):,} training pairs, {len(valid):,} validation pairs; out: {out}",
            flush=True,
        )
    hooks = Hooks(
        evaluate=make_evaluator(
            valid, vocab, preset.get("valid_pairs", 2000), preset.get("bleu_pairs", 200), tc.seed
        ),
        save=lambda path, m, **state: save(path, m, vocab, **state),
    )
    teacher = None if args.teacher is None else load_teacher(args.teacher, vocab, mcfg.kind)
    trainer = Trainer(model, tc, train_data, out, hooks, device, d, teacher)
    if teacher is not None and d.main:
        print(f"distilling from {args.teacher} ({teacher.num_parameters() / 1e6:.2f}M parameters), "
              f"weight {tc.distill_weight}", flush=True)  # fmt: skip
    if d.main:
        precision = "bf16 autocast" if trainer.bf16 else "fp32"
        wait = os.environ.get("OMP_WAIT_POLICY", "default (spin, then sleep)")
        print(f"precision: {precision}; threads: {torch.get_num_threads()}; OpenMP wait policy: {wait}")
    if trainer.resume():
        if d.main:
            print(f"resumed from step {trainer.state.step} (epoch {trainer.state.epoch})", flush=True)
        if trainer.new_stretch and d.main:
            changes = ", ".join(f"{k} {a} -> {b}" for k, (a, b) in trainer.new_stretch.items())
            print(f"a new stretch ({changes}): early stopping counts from here", flush=True)
    elif args.init_from is not None:  # a fresh run only: a resumed one has its own weights
        copied, fresh = warm_start(trainer.raw, args.init_from, vocab)
        if d.main:
            new = f": {', '.join(fresh[:6])}{' ...' if len(fresh) > 6 else ''}" if fresh else ""
            print(f"initialised from {args.init_from}: {copied} tensors copied, {len(fresh)} new{new}")
    state = trainer.run()
    if d.main:
        minutes = state.elapsed / 60
        print(f"stopped: {state.stop_reason} at step {state.step}, {minutes:.1f} min, best {state.best:.4f}")
        (out / "config.json").write_text(json.dumps({"model": mcfg.to_dict(), "train": asdict(tc)}, indent=1))
        plot(out)
    if state.stop_reason == "interrupted":  # saved: the chain stops here (a proposer's too)
        raise KeyboardInterrupt
    reverse_path = train_reverse(args, d, preset, out)
    if d.world > 1:
        torch.save(model.state_dict(), out / f"final-rank{d.rank}.pt")
        return None
    return Trained(out, folder, train_data, preset, proposer_path, reverse_path)
