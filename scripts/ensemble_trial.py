"""A one-off trial (issue 39; docs/EXPERIMENTS.md §47): the shipped model's n-best rescored with the
larger register model (checkpoints/large_reg.pt) as a second opinion, against the shipped model's top
line. Writes, for a blind sheet's line file, two files of ``upper<TAB>lower`` (``shipped.tsv``: the
site's top line; ``ensemble.tsv``: the n-best's line with the best sum of the site's rank score and
``--weight`` times the larger model's mean log-probability per token, in the line's register).

    python scripts/ensemble_trial.py --lines work/blind40/lines_formal.tsv --out work/ens/formal
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch

from data.paths import default_model_dir, graph_cache_dir
from data.text import REGISTERS
from data.vocab import BOS_ID, EOS_ID, PAD_ID
from duilian.engine import Engine, set_decode_threads
from duilian.service import LoadedModel
from model.decoding.options import SERVE_INT8, SERVE_RUNTIME, DecodeOptions
from model.net.checkpoint import load_model


def mean_logp(model, vocab, upper: str, lowers: list[str], register: int) -> list[float]:
    """The model's mean log-probability per token (the end of sequence included) of each lower line."""
    src = torch.tensor([vocab.encode(upper)] * len(lowers))
    rows = [[*vocab.encode(lo), EOS_ID] for lo in lowers]
    width = max(map(len, rows))
    tgt = torch.full((len(rows), width), PAD_ID)
    for i, r in enumerate(rows):
        tgt[i, : len(r)] = torch.tensor(r)
    tgt_in = torch.cat([torch.full((len(rows), 1), BOS_ID), tgt[:, :-1]], 1)
    with torch.no_grad():
        logp = model(src, tgt_in, torch.full((len(rows),), register)).log_softmax(-1)
    picked = logp.gather(2, tgt[..., None])[..., 0]
    mask = tgt != PAD_ID
    return ((picked * mask).sum(1) / mask.sum(1)).tolist()


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--lines", type=Path, required=True)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--large", type=Path, default=Path("checkpoints/large_reg.pt"))
    p.add_argument("--weight", type=float, default=1.0)
    p.add_argument("--n-best", type=int, default=10)
    args = p.parse_args()
    set_decode_threads(1)
    torch.set_num_threads(1)
    site = LoadedModel.load(default_model_dir(), engine=Engine(SERVE_INT8, SERVE_RUNTIME, graph_cache_dir()))
    large, vocab, _ = load_model(args.large)
    assert vocab.to_bytes() == site.decoder.vocab.to_bytes(), "the two models' vocabularies differ"
    args.out.mkdir(parents=True, exist_ok=True)
    shipped, ensemble, changed, rows = [], [], 0, []
    for line in args.lines.read_text(encoding="utf-8").splitlines():
        upper, _, group = ([*line.split("\t"), "", ""])[:3]
        register = REGISTERS.index(group) if group in REGISTERS else 0
        cands = site.decoder.generate(upper, DecodeOptions(n_best=args.n_best)).candidates
        texts = [c.text for c in cands]
        large_lp = mean_logp(large, vocab, upper, texts, register)
        total = [c.rank_score + args.weight * lp for c, lp in zip(cands, large_lp, strict=True)]
        best = max(range(len(cands)), key=total.__getitem__)
        shipped.append(f"{upper}\t{texts[0]}\n")
        ensemble.append(f"{upper}\t{texts[best]}\n")
        changed += best != 0
        rows.append(
            {"upper": upper, "texts": texts, "rank": [c.rank_score for c in cands], "large": large_lp}
        )
    (args.out / "shipped.tsv").write_text("".join(shipped), encoding="utf-8")
    (args.out / "ensemble.tsv").write_text("".join(ensemble), encoding="utf-8")
    (args.out / "scores.json").write_text(json.dumps(rows, ensure_ascii=False), encoding="utf-8")
    print(f"{len(shipped)} lines, top line changed in {changed}")


if __name__ == "__main__":
    main()
