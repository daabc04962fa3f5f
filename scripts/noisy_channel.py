"""Noisy-channel reranking of the served 10-best with the bundle's reverse model (下联求上联),
for a blind comparison (docs/EXPERIMENTS.md §35, docs/blind/s24_noisy_channel):

    python scripts/noisy_channel.py work/blind/lines_classical.tsv work/blind/nc_classical 0.25,0.5

A candidate's new rank is the search's rank score per character plus ``lam`` times
log p(upper | candidate) per character under the reverse model. Writes ``nc_<lam>.tsv``
(upper<TAB>lower, a ``file:`` system for ``python -m model.blind sheet``) for the served top
line (``nc_0.tsv``) and each ``lam``, and says how many top lines each changed."""

import sys
from pathlib import Path

import numpy as np

from data.paths import default_model_dir, graph_cache_dir
from duilian.engine import Engine, set_decode_threads
from duilian.inputs import Query
from duilian.service import LoadedModel, decode_options
from model.decoding.options import SERVE_INT8, SERVE_RUNTIME
from model.decoding.search import rescore

lines_file, out_dir = Path(sys.argv[1]), Path(sys.argv[2])
lams = [float(x) for x in sys.argv[3].split(",")]
set_decode_threads(1)
m = LoadedModel.load(
    default_model_dir(), None, Engine(SERVE_INT8, SERVE_RUNTIME, graph_cache_dir()), lazy=True
)
rev = m.reverse_decoder()
vocab = m.decoder.vocab
uppers = [line.split("\t")[0] for line in lines_file.read_text(encoding="utf-8").splitlines() if line]
chosen = {lam: [] for lam in [0.0, *lams]}
for upper in uppers:
    res = m.decoder.generate(upper, decode_options(Query(upper, 10), 10))
    cands = res.candidates
    if not cands:
        for lam in chosen:
            chosen[lam].append("")
        continue
    src = np.array([vocab.encode(c.text) for c in cands], dtype=np.int64)  # (K, L)
    tok = np.array([vocab.encode(upper)] * len(cands), dtype=np.int64)[:, None, :]  # (K, 1, L)
    back = rescore(rev.engine, src, tok)[:, 0] / len(upper)
    for lam in chosen:
        total = np.array([c.rank_score for c in cands]) + lam * back
        chosen[lam].append(cands[int(np.argmax(total))].text)
out_dir.mkdir(parents=True, exist_ok=True)
for lam, picks in chosen.items():
    (out_dir / f"nc_{lam:g}.tsv").write_text(
        "".join(f"{u}\t{p}\n" for u, p in zip(uppers, picks, strict=True)), encoding="utf-8"
    )
    changed = sum(a != b for a, b in zip(picks, chosen[0.0], strict=True))
    print(f"lam {lam:g}: {changed} of {len(uppers)} top lines changed")
