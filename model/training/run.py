"""`make train`: data stage (if stale) → training → evaluation → model bundle.

    python -m model.train --preset {tiny,cpu,gpu} [--max-minutes M] [--set lr=1e-3 --set model.d_model=256]
    torchrun --nproc_per_node=2 -m model.train --preset tiny      # DDP (gloo on CPU, NCCL on CUDA)

Run again with the same command after an interruption and it resumes from the newest
checkpoint in ``--out`` (default ``work/train/<preset>``). The bundle goes to
``<out>/bundle``; ``--ship`` also installs it as ``models/default``.
"""

from __future__ import annotations

import argparse
import gzip
import json
import lzma
import math
import os
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path
from typing import IO, Any

import numpy as np
import sacrebleu
import torch
import torch.distributed as dist

from data.paths import corpus_dir, data_dir, default_model_dir, work_dir
from data.vocab import Vocab
from model.batching import Batch, bucket_batches, collate
from model.bundle import export_bundle, install_bundle
from model.bundle import load_proposer as bundle_proposer
from model.card import write_card
from model.checkpoint import CoupletModel, build_model, load_model, save
from model.greedy import greedy
from model.runtime import set_omp_wait_policy
from model.scoring import mean_nll
from model.tagger import CoupletTagger
from model.trainer import Dist, Hooks, TrainConfig, Trainer
from model.transformer import ModelConfig

PRESETS = Path(__file__).parent / "presets"


class UsageError(Exception):
    """Bad input from the user: printed as one line, exit status 2."""


# ---- presets -------------------------------------------------------------------------


def load_preset(name: str, overrides: list[str]) -> dict[str, Any]:
    path = PRESETS / f"{name}.json"
    if not path.is_file():
        names = ", ".join(sorted(p.stem for p in PRESETS.glob("*.json")))
        raise UsageError(f"unknown preset {name!r} (choose from {names})")
    preset = json.loads(path.read_text(encoding="utf-8"))
    for item in overrides:
        _apply_override(preset, item)
    return preset


def _apply_override(preset: dict[str, Any], item: str) -> None:
    """``key=value`` sets a training option; ``model.key=value`` a model option; JSON values."""
    key, sep, raw = item.partition("=")
    if not sep:
        raise UsageError(f"--set expects key=value, got {item!r}")
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        value = raw
    section, _, name = key.rpartition(".")
    if section == "model" and name in ModelConfig.__dataclass_fields__:
        preset["model"][name] = value
    elif not section and name in TrainConfig.__dataclass_fields__:
        preset["train"][name] = value
    elif not section and name in ("valid_pairs", "bleu_pairs", "eval_limit", "proposer"):
        preset[name] = value
    else:
        raise UsageError(f"--set: unknown option {key!r}")


# ---- data ----------------------------------------------------------------------------


def open_text(path: Path) -> IO[str]:
    """A UTF-8 text file, read through xz or gzip when its name ends in ``.xz`` or ``.gz``."""
    if path.suffix == ".xz":
        return lzma.open(path, "rt", encoding="utf-8")
    if path.suffix == ".gz":
        return gzip.open(path, "rt", encoding="utf-8")
    return open(path, encoding="utf-8")


def data_file(folder: Path, name: str) -> Path:
    """``folder/name``, else its compressed copy ``name.xz`` or ``name.gz`` (as carried to a
    lent GPU machine, scripts/device_prepare.sh)."""
    for candidate in (name, f"{name}.xz", f"{name}.gz"):
        if (folder / candidate).is_file():
            return folder / candidate
    return folder / name


def read_tsv(path: Path) -> list[tuple[str, str]]:
    pairs = []
    with open_text(path) as f:
        for line in f:
            upper, sep, lower = line.rstrip("\n").partition("\t")
            if sep and upper and lower:
                pairs.append((upper, lower))
    return pairs


class PairData:
    """Encoded pairs in two flat arrays with offsets (compact for 700k pairs)."""

    def __init__(self, pairs: list[tuple[str, str]], vocab: Vocab, max_len: int, batch_tokens: int) -> None:
        keep = [(u, lo) for u, lo in pairs if len(u) == len(lo) and len(u) < max_len]
        self.pairs = keep
        self.batch_tokens = batch_tokens
        lens = np.array([len(u) for u, _ in keep], dtype=np.int64)
        self.offsets = np.concatenate([[0], np.cumsum(lens)])
        self.src = np.fromiter(
            (i for u, _ in keep for i in vocab.encode(u)), dtype=np.int32, count=int(lens.sum())
        )
        self.tgt = np.fromiter(
            (i for _, lo in keep for i in vocab.encode(lo)), dtype=np.int32, count=int(lens.sum())
        )
        self.lengths = (lens + 1).tolist()

    def __len__(self) -> int:
        return len(self.pairs)

    def epoch_batches(self, epoch: int, seed: int) -> list[list[int]]:
        return bucket_batches(self.lengths, self.batch_tokens, seed, epoch)

    def collate(self, indices: list[int]) -> Batch:
        o = self.offsets
        return collate([(self.src[o[i] : o[i + 1]], self.tgt[o[i] : o[i + 1]]) for i in indices])

    def fixed_batches(self, indices: list[int]) -> list[Batch]:
        """Batches of ``indices`` in length order (for validation)."""
        order = sorted(indices, key=lambda i: self.lengths[i])
        return [self.collate(part) for part in _cut_by_tokens(order, self.lengths, self.batch_tokens)]


def _cut_by_tokens(order: list[int], lengths: list[int], budget: int) -> list[list[int]]:
    out: list[list[int]] = [[]]
    for i in order:
        if out[-1] and lengths[i] * 2 * (len(out[-1]) + 1) > budget:
            out.append([])
        out[-1].append(i)
    return [b for b in out if b]


def run_data_stage() -> None:
    """`python -m data` rebuilds work/data only when its inputs changed."""
    result = subprocess.run([sys.executable, "-m", "data"], check=False)
    if result.returncode != 0:
        print(
            f"note: the data stage exited with status {result.returncode}; using the files present",
            flush=True,
        )


def load_data(folder: Path, max_len: int, batch_tokens: int) -> tuple[Vocab, PairData, PairData]:
    needed = [data_file(folder, n) for n in ("spm.model", "train.tsv", "valid.tsv")]
    missing = [str(p) for p in needed if not p.is_file()]
    if missing:
        raise UsageError(f"missing data file(s): {', '.join(missing)}; run `make data` first")
    try:
        vocab = Vocab.from_file(needed[0])
    except (RuntimeError, OSError) as e:  # sentencepiece's loader on a file that is not a model
        raise UsageError(f"{needed[0]}: not a sentencepiece model ({e}); run `make data` again") from e
    train = PairData(read_tsv(needed[1]), vocab, max_len, batch_tokens)
    valid = PairData(read_tsv(needed[2]), vocab, max_len, batch_tokens)
    if not len(train) or not len(valid):
        raise UsageError(f"no usable pairs in {folder}/train.tsv or valid.tsv")
    return vocab, train, valid


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


# ---- hardware ------------------------------------------------------------------------


def pick_device(d: Dist, wanted: str) -> torch.device:
    if wanted == "cuda" or (wanted == "auto" and torch.cuda.is_available()):
        if not torch.cuda.is_available():
            raise UsageError("--device cuda but no CUDA device is available")
        torch.cuda.set_device(d.local_rank)
        return torch.device("cuda", d.local_rank)
    return torch.device("cpu")


def setup_cpu(threads: int) -> None:
    torch.set_flush_denormal(True)  # denormals slowed a collapsing run to a crawl
    if threads:
        torch.set_num_threads(threads)


def estimate_memory(cfg: ModelConfig, n_params: int, batch_tokens: int, bf16: bool) -> dict[str, int]:
    """Bytes: fp32 weights, grads, AdamW moments, and activations of one batch (rough)."""
    width = 2 if bf16 else 4
    per_layer_token = 34 * cfg.d_model + 2 * cfg.d_ff  # pre-norm layer, Korthikanti-style count
    layers = cfg.n_enc_layers + 1.5 * cfg.n_dec_layers  # decoder layers hold cross-attention too
    per_token = layers * per_layer_token * width + cfg.vocab_size * (width + 8) / 2  # logits: target half
    return {
        "weights": 4 * n_params,
        "grads": 4 * n_params,
        "optimizer": 8 * n_params,
        "activations": int(batch_tokens * per_token),
    }


def available_memory(device: torch.device) -> int:
    if device.type == "cuda":
        return int(torch.cuda.mem_get_info(device)[0])
    try:
        meminfo = Path("/proc/meminfo").read_text()
        kb = next(int(line.split()[1]) for line in meminfo.splitlines() if line.startswith("MemAvailable"))
        return kb * 1024
    except (OSError, StopIteration):
        return 4 << 30


def fit_batch(cfg: ModelConfig, n_params: int, tc: TrainConfig, device: torch.device) -> int:
    """The preset's batch, halved until the estimate fits in 60% of free memory."""
    budget = 0.6 * available_memory(device)
    tokens = tc.batch_tokens
    while tokens > 256 and sum(estimate_memory(cfg, n_params, tokens, tc.amp != "off").values()) > budget:
        tokens //= 2
    return tokens


def describe(cfg: ModelConfig, n_params: int, tc: TrainConfig, device: torch.device) -> str:
    mem = estimate_memory(cfg, n_params, tc.batch_tokens, tc.amp != "off")
    parts = ", ".join(f"{k} {v / 2**20:.0f} MiB" for k, v in mem.items())
    return f"model: {n_params / 1e6:.2f}M parameters on {device}; training memory estimate: {parts}"


# ---- after training ------------------------------------------------------------------


def plot(out: Path) -> Path | None:
    """PNG of training/validation loss and validation BLEU against minutes."""
    import csv

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    def rows(name: str) -> list[dict[str, str]]:
        p = out / name
        return list(csv.DictReader(open(p, encoding="utf-8"))) if p.exists() else []

    tr, va = rows("train_log.csv"), rows("valid_log.csv")
    if not tr and not va:
        return None
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
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
    plt.close(fig)
    return out / "plot.png"


def sensitive_hashes() -> tuple[np.ndarray | None, int | None]:
    """The corpus's sensitive-word list, hashed, and its longest word's length (None, None
    without the list)."""
    try:
        from data.sensitive import hash_words, normalised
    except ImportError:
        print("note: data.sensitive.hash_words not available; bundle carries no sensitive words")
        return None, None
    path = corpus_dir() / "badwords.txt"
    if not path.exists():
        return None, None
    words = [w.strip() for w in path.read_text(encoding="utf-8").splitlines() if w.strip()]
    longest = max((len(w) for w in normalised(words)), default=0)
    return np.asarray(hash_words(words), dtype=np.uint64), longest


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


def load_proposer(path: Path, vocab: Vocab) -> CoupletTagger:
    """``model.bundle.load_proposer`` of a run folder's best checkpoint (or a checkpoint file)."""
    try:
        return bundle_proposer(run_checkpoint(path), vocab)
    except ValueError as e:
        raise UsageError(str(e)) from e


def train_proposer(args: argparse.Namespace, d: Dist, preset: dict[str, Any], out: Path) -> Path | None:
    """The proposer to bundle: ``--proposer``, else the preset's ``proposer`` preset trained
    first into ``<out>/proposer`` (resuming like any run), else none."""
    if args.proposer is not None:
        return Path(args.proposer)
    name = preset.get("proposer")
    if not name or args.no_proposer or preset["model"].get("kind", "seq2seq") != "seq2seq":
        return None
    sub = argparse.Namespace(**vars(args))
    sub.preset, sub.out, sub.set = name, out / "proposer", []
    sub.max_minutes = sub.max_steps = None
    sub.no_export = sub.no_eval = sub.skip_data = True
    sub.ship, sub.proposer, sub.no_proposer = False, None, True
    if d.main:
        print(f"proposer: training the {name!r} preset first, into {sub.out}", flush=True)
    train(sub, d)
    return sub.out


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
        from model.evaluate import evaluate_files

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
                from model.decode import DecodeOptions

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


# ---- main ----------------------------------------------------------------------------


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m model.train", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    p.add_argument("--preset", default="cpu", help="tiny, cpu or gpu (files in model/presets)")
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
    return p.parse_args(argv)


def build(args: argparse.Namespace) -> tuple[dict[str, Any], TrainConfig]:
    preset = load_preset(args.preset, args.set)
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


def train(args: argparse.Namespace, d: Dist) -> int:
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
    vocab, train_data, valid = load_data(folder, max_len, tc.batch_tokens)
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
    if d.world > 1:
        torch.save(model.state_dict(), out / f"final-rank{d.rank}.pt")
        return 0
    finish(args, out, folder, train_data, preset, proposer_path)
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    d = Dist.from_env()
    if d.world > 1:
        dist.init_process_group("nccl" if torch.cuda.is_available() and args.device != "cpu" else "gloo")
    try:
        return train(args, d)
    except UsageError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted; run the same command again to resume", file=sys.stderr)
        return 130
    finally:
        if d.world > 1 and dist.is_initialized():
            dist.destroy_process_group()


if __name__ == "__main__":
    set_omp_wait_policy("model.train")
    sys.exit(main())
