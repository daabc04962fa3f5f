"""A bundle's reranker, made: the model's own n-best for training upper lines, the scorer trained
to tell the human lower line from them (model/training/rerank.py), the scorer put into the
bundle (model/export/scorer.py), and the weight it would take on validation lines.

``python -m model.rerank`` runs the steps (docs/TRAINING.md, "The reranker")::

    python -m model.rerank nbest --bundle B --pairs work/data/train.tsv --out N.jsonl --limit 15000
    python -m model.rerank train --bundle B --train N.jsonl --valid V.jsonl --out S.pt [--steps 4000]
    python -m model.rerank weights --bundle B --trained S.pt --valid V.jsonl
    python -m model.rerank add --bundle B --trained S.pt

``nbest`` decodes as the site does (int8 on ONNX Runtime, the proposer, the pairing table,
the blocked words; the bundle's own reranker off), ten candidates a line, one JSON object a
line, and resumes a file it finds part-written. With ``--limit`` it takes a sample of the pairs:
two fifths formal, a fifth classical, the rest general (the third column of the data stage's
``train.tsv``; fewer where there are fewer), so the scorer sees the registers it is for.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from data.paths import graph_cache_dir
from model.decoding.decoder import Decoder
from model.decoding.options import SERVE_INT8, SERVE_RUNTIME, DecodeOptions
from model.decoding.plan import ConstraintError
from model.decoding.reranking import Reranker
from model.export.engines import reranker_of, torch_decoder
from model.export.models import models_of
from model.export.scorer import add_scorer, model_embedding, trained_scorer
from model.release.eval_decode import bar
from model.store.bundle import Bundle, decoder_graph_keys, load_bundle, model_config
from model.training.rerank import ScorerTraining, read_groups, scorer_config, train_scorer

N_BEST = 10  # candidates a line, as the site's default answer has them
QUOTA = {"formal": 2 / 5, "classical": 1 / 5}  # of a sample; the rest general
WEIGHTS = (0.0, 0.02, 0.05, 0.1, 0.2, 0.3, 0.5, 1.0)  # the weights ``weights`` reports

Row = tuple[str, str, str]  # upper, lower, register


def read_pairs(path: Path) -> list[Row]:
    """upper<TAB>lower[<TAB>register] rows (register ``general`` where there is none)."""
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        cols = line.split("\t")
        if len(cols) >= 2 and cols[0] and cols[1]:
            rows.append((cols[0], cols[1], cols[2] if len(cols) > 2 and cols[2] else "general"))
    return rows


def sample(rows: Sequence[Row], limit: int, seed: int) -> list[Row]:
    """``limit`` rows drawn with ``seed``: formal and classical ones up to their share of it
    (``QUOTA``), general ones for the rest (all of it where the data has no registers)."""
    by: dict[str, list[Row]] = {}
    for r in rows:
        by.setdefault(r[2] if r[2] in QUOTA else "general", []).append(r)
    rng = random.Random(seed)
    out: list[Row] = []
    for group, share in QUOTA.items():
        mine = by.get(group, [])
        out += rng.sample(mine, min(int(limit * share), len(mine)))
    general = by.get("general", [])
    return out + rng.sample(general, min(limit - len(out), len(general)))


def served_decoder(bundle: Bundle) -> Decoder:
    """The bundle's decoder as the site runs it, without a reranker."""
    return torch_decoder(
        models_of(bundle).model,
        bundle.vocab,
        int8=SERVE_INT8,
        proposer=models_of(bundle).proposer,
        runtime=SERVE_RUNTIME,
        pairing=bundle.pairing,
        blocked=bundle.blocked,
        graph_cache=graph_cache_dir(),
        graph_keys=decoder_graph_keys(bundle),
    )


def write_nbest(decoder: Decoder, rows: Sequence[Row], out: Path, progress: bool | None = None) -> int:
    """The decoder's ``N_BEST`` for each row's upper line, appended to ``out`` from the first row
    it does not hold yet (a stopped run goes on); lines the rules refuse are left out. Returns
    the groups written now."""
    done = 0
    if out.exists():
        done = sum(1 for _ in out.open(encoding="utf-8"))
    options = DecodeOptions(n_best=N_BEST, rerank_weight=0.0)
    written = 0
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("a", encoding="utf-8") as f, bar(len(rows) - done, progress, "n-best") as shown:
        for upper, lower, register in rows[done:]:
            try:
                answer = decoder.generate(upper, options)
                cands = [{"text": c.text, "rank": c.rank_score} for c in answer.candidates]
            except ConstraintError:  # a line the rules refuse: an empty group keeps the count
                cands = []
            row = {"upper": upper, "lower": lower, "register": register, "cands": cands}
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
            f.flush()
            written += 1
            shown.update(1)
    return written


def read_nbest(path: Path) -> list[dict[str, Any]]:
    return [json.loads(r) for r in path.read_text(encoding="utf-8").splitlines() if r.strip()]


def agreement(line: str, human: str) -> float:
    """The share of the human line's places where ``line`` has the same character."""
    return sum(a == b for a, b in zip(line, human, strict=False)) / max(1, len(human))


def weight_table(
    reranker: Reranker, groups: Iterable[dict[str, Any]], weights: Sequence[float] = WEIGHTS
) -> list[dict[str, Any]]:
    """For each weight: the reranked top line's agreement with the human line, by register and in
    all, and the share of lines whose top line the weight changes."""
    scored = []
    for g in groups:
        if g["cands"]:
            s = reranker.scores(g["upper"], [c["text"] for c in g["cands"]])
            scored.append((g, [(c["text"], c["rank"], float(v)) for c, v in zip(g["cands"], s, strict=True)]))

    def top(cands: list[tuple[str, float, float]], w: float) -> str:
        return max(cands, key=lambda c: c[1] + w * c[2])[0]

    table = []
    for w in weights:
        by: dict[str, list[float]] = {}
        changed = 0
        for g, cands in scored:
            line = top(cands, w)
            by.setdefault(g["register"], []).append(agreement(line, g["lower"]))
            changed += line != top(cands, 0.0)
        every = [v for vs in by.values() for v in vs]
        table.append(
            {
                "weight": w,
                "agreement": round(sum(every) / max(1, len(every)), 4),
                "by_register": {k: round(sum(v) / len(v), 4) for k, v in sorted(by.items())},
                "changed": round(changed / max(1, len(scored)), 4),
            }
        )
    return table


def chosen_weight(table: Sequence[dict[str, Any]], tolerance: float = 0.01) -> float:
    """The largest weight whose agreement with the human lines stays within ``tolerance`` (1%,
    relative) of the unreranked top line's: the rule that chose 0.05 before judging (§44)."""
    base = next(row["agreement"] for row in table if row["weight"] == 0.0)
    kept = [row["weight"] for row in table if row["agreement"] >= base * (1 - tolerance)]
    return max(kept)


def make_reranker(
    bundle_dir: Path,
    folder: Path,
    work: Path,
    settings: dict[str, Any],
    log: Callable[[str], None] = print,
) -> Path:
    """`make train`'s reranker step on an exported bundle: the bundle's n-best for a sample of the
    data folder's training pairs (``settings["groups"]``) and validation pairs
    (``settings["valid_groups"]``), written to ``work`` (a stopped step goes on from there), the
    scorer trained ``settings["steps"]`` steps, its weight table on validation, and the scorer
    put into the bundle. Returns the scorer's weights file."""
    bundle = load_bundle(bundle_dir)
    decoder = served_decoder(bundle)
    seed = int(settings.get("seed", 1))
    train_rows = sample(read_pairs(folder / "train.tsv"), int(settings["groups"]), seed)
    valid_rows = sample(read_pairs(folder / "valid.tsv"), int(settings["valid_groups"]), seed)
    for name, rows in (("train", train_rows), ("valid", valid_rows)):
        log(f"reranker: the bundle's {N_BEST}-best for {len(rows):,} {name} lines")
        write_nbest(decoder, rows, work / f"{name}_nbest.jsonl")
    cfg = scorer_config(model_config(bundle_dir, "model"), layers=int(settings.get("layers", 1)))
    spec = ScorerTraining(steps=int(settings["steps"]), threads=int(settings.get("threads", 1)))
    trained = work / "scorer.pt"
    train = read_groups(work / "train_nbest.jsonl")
    valid = read_groups(work / "valid_nbest.jsonl")
    best = train_scorer(cfg, model_embedding(bundle_dir), bundle.vocab, train, valid, trained, spec, log)
    log(f"reranker: best validation {best}")
    reranker = reranker_of(trained_scorer(bundle_dir, trained), bundle.vocab, graph_cache_dir())
    table = weight_table(reranker, read_nbest(work / "valid_nbest.jsonl"))
    chosen = chosen_weight(table)
    (work / "weights.json").write_text(json.dumps(table, ensure_ascii=False, indent=1), encoding="utf-8")
    log(f"reranker: agreement by weight in {work / 'weights.json'}; the rule's weight {chosen}")
    return add_scorer(bundle_dir, trained, record={"weights": table, "weight": chosen})
