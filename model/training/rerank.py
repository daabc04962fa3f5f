"""Training the reranker's scorer (model/net/scorer.py) on groups of lower lines.

A group is an upper line, its human lower line and the shipped model's n-best for it (the
machine lines that differ from the human one), one JSON object a line::

    {"upper": ..., "lower": ..., "register": ..., "cands": [{"text": ..., "rank": ...}, ...]}

(model/release/rerank.py writes them). The loss is listwise: a softmax over the group's
scores, the human line the target. One thread by default (the scorer is small: a second
thread gained little and slowed the tests beside it), fp32 (bf16 autocast was ten times
slower for this model on this CPU: docs/EXPERIMENTS.md §44), AdamW with warm-up and cosine
decay over ``steps``. Every ``eval_every`` steps the validation groups are scored; the
weights of the lowest validation loss are kept (``best``), and the whole state is written
(``state``) so that a stopped run resumes exactly: the groups are shuffled by epoch from the
seed, so step s sees the same batch whether or not the run stopped before it.

Shapes: G groups, K lines a group, S places.
"""

from __future__ import annotations

import json
import math
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from data.files import atomic_file
from data.vocab import Vocab
from model.net.scorer import PairScorer, embed_sha256
from model.net.transformer import ModelConfig
from model.spec.scorer_input import pair_ids

Group = tuple[str, list[str]]  # the upper line; the human lower line first, then the machine's


def scorer_config(model: ModelConfig, layers: int = 1, heads: int = 4) -> ModelConfig:
    """The scorer's shape for a couplet model: its vocabulary and width (the shared table's), one
    encoder layer (one costs 1.3-1.7 ms for ten candidates on ONNX Runtime, two 4.6: §44)."""
    return ModelConfig(
        vocab_size=model.vocab_size,
        d_model=model.d_model,
        n_heads=heads,
        n_enc_layers=layers,
        n_dec_layers=0,
        d_ff=4 * model.d_model,
        max_len=64,
        kind="scorer",
        tie_embeddings=False,
    )


@dataclass(frozen=True)
class ScorerTraining:
    steps: int = 4000
    batch: int = 32  # groups a step
    lr: float = 5e-4
    warmup: int = 200
    weight_decay: float = 0.01
    eval_every: int = 200
    seed: int = 0
    threads: int = 1


def read_groups(path: Path) -> list[Group]:
    """The groups of an n-best file, the human line first; groups without a machine line that
    differs from it are left out (nothing to tell apart)."""
    out = []
    with path.open(encoding="utf-8") as f:
        for row in f:
            if not row.strip():
                continue
            r = json.loads(row)
            machine = [c["text"] for c in r["cands"] if c["text"] != r["lower"]]
            if machine:
                out.append((r["upper"], [r["lower"], *machine]))
    return out


def group_scores(model: PairScorer, vocab: Vocab, groups: Sequence[Group]) -> torch.Tensor:
    """(G, K) scores of each group's lines; -1e9 where a group has fewer than K lines."""
    k = max(len(lines) for _, lines in groups)
    ids = [[pair_ids(vocab, upper, line, model.cfg.max_len) for line in lines] for upper, lines in groups]
    s = max(1, max(len(u) for rows in ids for u, _ in rows))
    upper = torch.zeros(len(groups) * k, s, dtype=torch.long)
    lower = torch.zeros_like(upper)
    live = torch.zeros(len(groups), k, dtype=torch.bool)
    for g, rows in enumerate(ids):
        for j, (u, low) in enumerate(rows):
            upper[g * k + j, : len(u)] = torch.tensor(u, dtype=torch.long)
            lower[g * k + j, : len(low)] = torch.tensor(low, dtype=torch.long)
            live[g, j] = len(u) > 0
    upper[:, 0] = torch.where(
        live.view(-1), upper[:, 0], torch.ones_like(upper[:, 0])
    )  # a key for empty rows
    return model(upper, lower).view(live.shape).masked_fill(~live, -1e9)


def evaluate(model: PairScorer, vocab: Vocab, groups: Sequence[Group]) -> dict[str, float]:
    """Validation: the listwise loss, how often the human line is scored first, and the mean
    reciprocal rank of the human line."""
    was = model.training
    model.eval()
    first, rr, loss = 0, 0.0, 0.0
    with torch.no_grad():
        for i in range(0, len(groups), 64):
            s = group_scores(model, vocab, groups[i : i + 64])
            target = torch.zeros(len(s), dtype=torch.long)
            loss += float(nn.functional.cross_entropy(s, target, reduction="sum"))
            rank = (s > s[:, :1]).sum(1) + 1
            first += int((rank == 1).sum())
            rr += float((1.0 / rank.float()).sum())
    model.train(was)
    n = max(1, len(groups))
    return {"loss": round(loss / n, 4), "human_first": round(first / n, 4), "mrr": round(rr / n, 4)}


def _lr(spec: ScorerTraining, step: int) -> float:
    warm = min(1.0, (step + 1) / spec.warmup)
    return spec.lr * warm * 0.5 * (1 + math.cos(math.pi * min(1.0, step / spec.steps)))


def _batch(spec: ScorerTraining, groups: Sequence[Group], step: int) -> list[Group]:
    """Step ``step``'s groups: epoch e's order is a shuffle seeded by (seed, e)."""
    per_epoch = max(1, len(groups) // spec.batch)
    epoch, i = divmod(step, per_epoch)
    order = list(range(len(groups)))
    random.Random(spec.seed * 1_000_003 + epoch).shuffle(order)
    return [groups[j] for j in order[i * spec.batch : (i + 1) * spec.batch]]


def train_scorer(
    cfg: ModelConfig,
    embed: torch.Tensor,
    vocab: Vocab,
    train: Sequence[Group],
    valid: Sequence[Group],
    out: Path,
    spec: ScorerTraining = ScorerTraining(),
    log: Callable[[str], None] = print,
    until: int | None = None,
) -> dict[str, Any]:
    """Train a scorer whose shared table is ``embed`` (the couplet model's), writing ``out``
    (the best weights and their validation, ``torch.save``) and ``out``.state (everything to
    resume); a run that finds the state resumes from it. ``until``: stop after that step (its
    state kept, as a run stopped there leaves it; the schedule stays ``spec.steps``'s). Returns
    the best validation."""
    torch.set_num_threads(spec.threads)
    torch.manual_seed(spec.seed)
    model = PairScorer(cfg)
    model.share_embedding(embed)
    trained = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(trained, lr=spec.lr, weight_decay=spec.weight_decay)
    state_path = out.with_name(out.name + ".state")
    step, best = 0, {"loss": math.inf}
    if state_path.exists():
        state = torch.load(state_path, weights_only=True)
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        torch.set_rng_state(state["rng"])
        step, best = int(state["step"]), dict(state["best"])
        log(f"resumed at step {step} (best validation {best})")
    else:
        log(f"scorer: {model.num_parameters()} trained parameters")
        log(f"groups: train {len(train)}, valid {len(valid)}")
        log(f"valid at start {evaluate(model, vocab, valid)}")
    start = time.time()
    model.train()
    while step < min(spec.steps, until or spec.steps):
        for g in opt.param_groups:
            g["lr"] = _lr(spec, step)
        s = group_scores(model, vocab, _batch(spec, train, step))
        loss = nn.functional.cross_entropy(s, torch.zeros(len(s), dtype=torch.long))
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(trained, 1.0)
        opt.step()
        step += 1
        if step % spec.eval_every == 0 or step == spec.steps:
            ev = evaluate(model, vocab, valid)
            log(f"step {step} {time.time() - start:.0f}s loss {loss.item():.4f} valid {ev}")
            if ev["loss"] < best["loss"]:
                best = {**ev, "step": step}
                save_trained(out, model, best, {"steps": spec.steps, "groups": len(train)})
            state = {
                "model": model.state_dict(),
                "optimizer": opt.state_dict(),
                "rng": torch.get_rng_state(),
                "step": step,
                "best": best,
            }
            _save(state_path, state)
    return best


def save_trained(out: Path, model: PairScorer, valid: dict[str, Any], training: dict[str, Any]) -> None:
    """A trained scorer's file (model/export/scorer.py's ``add_scorer`` reads it): its
    configuration, its own weights (all but the shared table), its validation figures, what its
    training was, and the digest of the shared table it was trained on."""
    own = {k: v for k, v in model.state_dict().items() if k != "embed.weight"}
    saved = {"model_config": model.cfg.to_dict(), "state_dict": own, "valid": valid, "training": training}
    _save(out, saved | {"embed_sha256": embed_sha256(model.embed.weight)})


def _save(path: Path, obj: Any) -> None:
    with atomic_file(path) as f:
        torch.save(obj, f)
