"""Issue 39's reranker trial (docs/EXPERIMENTS.md §44): a small encoder that tells a human lower
line from the shipped model's 10-best for the same upper line, then the 10-best reranked by the
model's rank score plus ``lambda`` times its score. A trial, not a served component.

    python scripts/reranker_trial.py nbest IN.tsv OUT.jsonl [--limit 15000 --seed 1]
    python scripts/reranker_trial.py train TRAIN.jsonl VALID.jsonl OUT.pt [--minutes 35] [--layers 2]
    python scripts/reranker_trial.py score OUT.pt NBEST.jsonl SCORED.jsonl [--layers 2]
    python scripts/reranker_trial.py pick VALID_SCORED.jsonl TEST_SCORED.jsonl OUTDIR [--lam 0.05]

``nbest``: IN is upper<TAB>lower[<TAB>register] (with ``--limit``: a sample, two fifths formal,
a fifth classical, the rest general); the shipped model's served decoding (int8 on ONNX
Runtime, one thread), n_best=10. ``train``: one thread, fp32 (bf16 autocast was ten times slower
for this model on this CPU), AdamW 5e-4 with warm-up and cosine decay over ``--minutes``; the
checkpoint of the lowest validation loss is kept. ``pick``: the agreement of the reranked top line
with the human line (characters in the same place) for each lambda on validation, then the test
lines' reranked top lines, one file per part (``rerank_<part>.tsv``, upper<TAB>lower).
"""

from __future__ import annotations

import argparse
import json
import math
import random
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

MAXLEN = 64
SPM = "models/default/spm.model"
Group = tuple[str, list[str]]


def nbest(args: argparse.Namespace) -> None:
    from data.paths import default_model_dir, graph_cache_dir
    from duilian.service import Engine, LoadedModel, set_decode_threads
    from model.decoding.options import SERVE_INT8, SERVE_RUNTIME, DecodeOptions

    rows = [r.split("\t") for r in Path(args.input).read_text(encoding="utf-8").splitlines() if r.strip()]
    if args.limit:
        by: dict[str, list[list[str]]] = {}
        for r in rows:
            by.setdefault(r[2] if len(r) > 2 else "general", []).append(r)
        rng = random.Random(args.seed)
        quota = {"formal": args.limit * 2 // 5, "classical": args.limit // 5}
        quota["general"] = args.limit - sum(quota.values())
        rows = [r for g, q in quota.items() for r in rng.sample(by.get(g, []), min(q, len(by.get(g, []))))]
    set_decode_threads(1)
    model = LoadedModel.load(default_model_dir(), engine=Engine(SERVE_INT8, SERVE_RUNTIME, graph_cache_dir()))
    with Path(args.output).open("w", encoding="utf-8") as f:
        for r in rows:
            try:
                answer = model.decoder.generate(r[0], DecodeOptions(n_best=10))
            except Exception:  # a line the rules refuse
                continue
            cands = [{"text": c.text, "rank": c.rank_score, "score": c.score} for c in answer.candidates]
            register = r[2] if len(r) > 2 else "general"
            row = {"upper": r[0], "lower": r[1], "register": register, "cands": cands}
            f.write(json.dumps(row, ensure_ascii=False) + "\n")


class Discriminator(nn.Module):
    """Upper and lower characters embedded and added place by place (the lines are aligned), two
    pre-norm encoder layers, the mean over the places -> one score of the pair."""

    def __init__(self, vocab: int = 7683, d: int = 192, layers: int = 2, heads: int = 4) -> None:
        super().__init__()
        self.eu, self.el = nn.Embedding(vocab, d), nn.Embedding(vocab, d)
        self.pos = nn.Embedding(MAXLEN, d)
        layer = nn.TransformerEncoderLayer(d, heads, 4 * d, dropout=0.1, batch_first=True, norm_first=True)
        self.enc = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(d)
        self.out = nn.Linear(d, 1)

    def forward(self, u: torch.Tensor, low: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        x = self.eu(u) + self.el(low) + self.pos.weight[None, : u.shape[1]]
        h = self.norm(self.enc(x, src_key_padding_mask=~mask))
        m = mask[..., None].float()
        return self.out((h * m).sum(1) / m.sum(1)).squeeze(-1)


class Lines:
    def __init__(self) -> None:
        import sentencepiece as spm

        self.sp = spm.SentencePieceProcessor(model_file=SPM)

    def ids(self, text: str) -> list[int]:
        return [self.sp.piece_to_id(ch) for ch in text][:MAXLEN]

    def scores(self, model: Discriminator, groups: list[Group]) -> torch.Tensor:
        """(G, K) scores of each group's lines (-1e9 at the padding of shorter groups)."""
        k = max(len(lines) for _, lines in groups)
        t = max(len(self.ids(u)) for u, _ in groups)
        u = torch.zeros(len(groups) * k, t, dtype=torch.long)
        low = torch.zeros_like(u)
        mask = torch.zeros(len(groups) * k, t, dtype=torch.bool)
        live = torch.zeros(len(groups), k, dtype=torch.bool)
        for g, (upper, lines) in enumerate(groups):
            ui = self.ids(upper)
            for j, line in enumerate(lines):
                li = self.ids(line)
                n = min(len(ui), len(li))
                u[g * k + j, :n], low[g * k + j, :n] = torch.tensor(ui[:n]), torch.tensor(li[:n])
                mask[g * k + j, :n] = True
                live[g, j] = True
        mask[:, 0] |= ~mask.any(1)  # padding rows: one key for the attention
        return model(u, low, mask).view(live.shape).masked_fill(~live, -1e9)


def groups(path: str) -> list[Group]:
    """The human line first, then the machine lines that differ from it."""
    out = []
    for row in Path(path).read_text(encoding="utf-8").splitlines():
        r = json.loads(row)
        machine = [c["text"] for c in r["cands"] if c["text"] != r["lower"]]
        if machine:
            out.append((r["upper"], [r["lower"], *machine]))
    return out


def evaluate(lines: Lines, model: Discriminator, gs: list[Group]) -> dict[str, float]:
    model.eval()
    first, rr, loss = 0, 0.0, 0.0
    with torch.no_grad():
        for i in range(0, len(gs), 64):
            s = lines.scores(model, gs[i : i + 64])
            target = torch.zeros(len(s), dtype=torch.long)
            loss += float(nn.functional.cross_entropy(s, target, reduction="sum"))
            rank = (s > s[:, :1]).sum(1) + 1
            first += int((rank == 1).sum())
            rr += float((1.0 / rank.float()).sum())
    model.train()
    n = len(gs)
    return {"loss": round(loss / n, 4), "human_first": round(first / n, 4), "mrr": round(rr / n, 4)}


def train(args: argparse.Namespace) -> None:
    from safetensors.numpy import load_file

    torch.set_num_threads(1)
    torch.manual_seed(0)
    random.seed(0)
    lines, tr, va = Lines(), groups(args.train), groups(args.valid)
    print(f"groups: train {len(tr)}, valid {len(va)}", flush=True)
    model = Discriminator(layers=args.layers)
    embed = load_file("models/default/model.safetensors")["embed.weight"].astype(np.float32)
    with torch.no_grad():  # both embeddings start from the shipped model's
        model.eu.weight.copy_(torch.from_numpy(embed))
        model.el.weight.copy_(torch.from_numpy(embed))
    opt = torch.optim.AdamW(model.parameters(), lr=5e-4, weight_decay=0.01)
    print("valid at start", evaluate(lines, model, va), flush=True)
    start, step, best = time.time(), 0, math.inf
    total = args.minutes * 60
    while time.time() - start < total:
        random.shuffle(tr)
        for i in range(0, len(tr), 32):
            frac = (time.time() - start) / total
            if frac >= 1:
                break
            for g in opt.param_groups:
                g["lr"] = 5e-4 * min(1.0, (step + 1) / 200) * 0.5 * (1 + math.cos(math.pi * frac))
            s = lines.scores(model, tr[i : i + 32])
            loss = nn.functional.cross_entropy(s, torch.zeros(len(s), dtype=torch.long))
            opt.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            step += 1
            if step % 200 == 0:
                ev = evaluate(lines, model, va)
                print(f"step {step} {time.time() - start:.0f}s valid {ev}", flush=True)
                if ev["loss"] < best:
                    best = ev["loss"]
                    torch.save(model.state_dict(), args.output)
    ev = evaluate(lines, model, va)
    print("end", step, ev, flush=True)
    if ev["loss"] < best:
        torch.save(model.state_dict(), args.output)


def score(args: argparse.Namespace) -> None:
    lines, model = Lines(), Discriminator(layers=args.layers)
    model.load_state_dict(torch.load(args.model))
    model.eval()
    with torch.no_grad(), Path(args.output).open("w", encoding="utf-8") as f:
        for row in Path(args.nbest).read_text(encoding="utf-8").splitlines():
            r = json.loads(row)
            texts = [c["text"] for c in r["cands"]] + [r["lower"]]
            s = lines.scores(model, [(r["upper"], texts)])[0].tolist()
            for c, v in zip(r["cands"], s, strict=False):
                c["disc"] = v
            r["human_disc"] = s[-1]
            f.write(json.dumps(r, ensure_ascii=False) + "\n")


def _top(r: dict[str, Any], lam: float) -> str:
    return str(max(r["cands"], key=lambda c: c["rank"] + lam * c["disc"])["text"])


def pick(args: argparse.Namespace) -> None:
    def rows(p: str) -> list[dict[str, Any]]:
        return [json.loads(r) for r in Path(p).read_text(encoding="utf-8").splitlines()]

    def agree(a: str, b: str) -> float:
        return sum(x == y for x, y in zip(a, b, strict=False)) / max(1, len(b))

    va, te = rows(args.valid), rows(args.test)
    for lam in (0, 0.02, 0.05, 0.1, 0.2, 0.3, 0.5, 1.0, 2.0):
        by: dict[str, list[float]] = {}
        for r in va:
            by.setdefault(r["register"], []).append(agree(_top(r, lam), r["lower"]))
        every = [v for vs in by.values() for v in vs]
        changed = sum(_top(r, lam) != _top(r, 0) for r in va) / len(va)
        parts = " ".join(f"{k} {sum(v) / len(v):.4f}" for k, v in sorted(by.items()))
        print(f"lambda {lam}: agreement {sum(every) / len(every):.4f} ({parts}); top changed {changed:.0%}")
    out = Path(args.outdir)
    out.mkdir(parents=True, exist_ok=True)
    for part in sorted({r["register"] for r in te}):
        mine = [r for r in te if r["register"] == part]
        text = "".join(f"{r['upper']}\t{_top(r, args.lam)}\n" for r in mine)
        (out / f"rerank_{part}.tsv").write_text(text, encoding="utf-8")
        (out / f"shipped_{part}.tsv").write_text(
            "".join(f"{r['upper']}\t{_top(r, 0)}\n" for r in mine), encoding="utf-8"
        )
        changed = sum(_top(r, args.lam) != _top(r, 0) for r in mine)
        print(f"{part}: {len(mine)} lines, {changed} changed at lambda {args.lam}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("nbest")
    a.add_argument("input")
    a.add_argument("output")
    a.add_argument("--limit", type=int, default=0)
    a.add_argument("--seed", type=int, default=1)
    a = sub.add_parser("train")
    a.add_argument("train")
    a.add_argument("valid")
    a.add_argument("output")
    a.add_argument("--minutes", type=float, default=35.0)
    a.add_argument("--layers", type=int, default=2)
    a = sub.add_parser("score")
    a.add_argument("model")
    a.add_argument("nbest")
    a.add_argument("output")
    a.add_argument("--layers", type=int, default=2)
    a = sub.add_parser("pick")
    a.add_argument("valid")
    a.add_argument("test")
    a.add_argument("outdir")
    a.add_argument("--lam", type=float, default=0.05)
    args = p.parse_args()
    {"nbest": nbest, "train": train, "score": score, "pick": pick}[args.cmd](args)


if __name__ == "__main__":
    main()
