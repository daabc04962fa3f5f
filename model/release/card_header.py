"""The model card's header: YAML front matter in the Hugging Face model-card metadata style
and the "How to use" section, rendered into a new card or again into an old one
(``--header-only``).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from model.release.card_sections import read_json
from model.release.metrics import BLEU_ORDERS
from model.store.layout import (
    CONFIG_FILE,
    PROPOSER_CONFIG,
    PROPOSER_WEIGHTS,
    REVERSE_CONFIG,
    REVERSE_WEIGHTS,
    VOCAB_FILE,
    WEIGHTS_FILE,
)


def _dig(d: dict[str, Any], *keys: str) -> Any:
    for key in keys:
        if not isinstance(d, dict) or key not in d:
            return None
        d = d[key]
    return d


CARD_TAGS = ("couplet", "duilian", "chinese-poetry", "text2text-generation", "safetensors")
SPLITS = {"full": "", "leakfree": ", its leak-free part"}
HOW_TO_USE = "## How to use"


def _yaml(value: str) -> str:
    """A YAML scalar: a JSON string is a YAML double-quoted one."""
    return json.dumps(value, ensure_ascii=False)


def front_matter(ev: dict[str, Any], name: str = "duilian-default") -> list[str]:
    """The card's YAML front matter, Hugging Face model-card metadata: license, language, tags,
    the metrics' names, and a ``model-index`` with a result per test split of ``eval.json``
    (BLEU-1/2/4 with their 95% intervals in the name, perplexity, hard-rule compliance)."""
    lines = [
        "---",
        "license: agpl-3.0",
        "language:",
        "- zh",
        "library_name: pytorch",
        "pipeline_tag: text2text-generation",
        "tags:",
        *(f"- {tag}" for tag in CARD_TAGS),
        "metrics:",
        "- bleu",
        "- perplexity",
    ]
    results: list[str] = []
    for split, described in SPLITS.items():
        figures = ev.get(split)
        if not isinstance(figures, dict):
            continue
        metrics: list[tuple[str, str, Any]] = []
        for n in BLEU_ORDERS:
            if f"bleu{n}" in figures:
                ci = figures.get(f"bleu{n}_ci95")
                label = f"BLEU-{n}" + (f" (95% interval ± {ci})" if ci is not None else "")
                metrics.append(("bleu", label, figures[f"bleu{n}"]))
        if "perplexity" in figures:
            metrics.append(("perplexity", "perplexity of the reference lines", figures["perplexity"]))
        hard = _dig(figures, "rules_model", "hard_ok")
        if hard is not None:
            metrics.append(("accuracy", "hard-rule compliance of the top candidate, %", hard))
        if not metrics:
            continue
        dataset = f"wb14123 couplet test set{described} ({figures.get('pairs', '?')} pairs)"
        results += [
            "  - task:",
            "      type: text2text-generation",
            f"      name: {_yaml('lower line of a couplet (对联下联)')}",
            "    dataset:",
            "      type: wb14123/couplet-dataset",
            f"      name: {_yaml(dataset)}",
            f"      config: {split}",
            "      split: test",
            "    metrics:",
        ]
        for kind, label, value in metrics:
            results += [f"    - type: {kind}", f"      name: {_yaml(label)}", f"      value: {value}"]
    if results:
        lines += ["model-index:", f"- name: {name}", "  results:", *results]
    return [*lines, "---", ""]


def how_to_use(bundle: Path, where: str = "models/default") -> list[str]:
    """The card's "How to use" section: the files, the command line, the REST call, Python;
    ``where``: the bundle's folder as the commands name it."""
    proposer = (bundle / PROPOSER_WEIGHTS).is_file()
    reverse = (bundle / REVERSE_WEIGHTS).is_file()
    model_arg = "" if where == "models/default" else f" --model {where}"
    return [
        HOW_TO_USE,
        "",
        "The bundle is this folder (SHA256SUMS lists the files the code reads):",
        "",
        f"- `{WEIGHTS_FILE}` and `{CONFIG_FILE}`: the encoder-decoder, fp16 weights in safetensors (the",
        "  tied embedding stored once) and its configuration in JSON;",
        *(
            [
                f"- `{PROPOSER_WEIGHTS}` and `{PROPOSER_CONFIG}`: the one-pass proposer (an encoder-only",
                "  tagger), likewise;",
            ]
            if proposer
            else []
        ),
        *(
            [
                f"- `{REVERSE_WEIGHTS}` and `{REVERSE_CONFIG}`: the reverse model (下联求上联: upper lines",
                "  for a lower line), its embedding shared with the encoder-decoder's file;",
            ]
            if reverse
            else []
        ),
        f"- `{VOCAB_FILE}`: the sentencepiece vocabulary (one piece a character) the models read;",
        "- the tables the search and the site read (training-set fingerprints, known lower lines,",
        "  pairing scores, 横批, blocked words).",
        "",
        "Install the project with its `serve` extra (`make setup`), then, from its folder:",
        "",
        "Command line:",
        "",
        "```console",
        f"$ duilian generate 春风得意马蹄疾 -n 3{model_arg}",
        f"$ duilian generate 春风得意马蹄疾 --locks __秋____ --json{model_arg}",
        *([f"$ duilian generate --reverse 家和万事兴 -n 3{model_arg}"] if reverse else []),
        "```",
        "",
        f"REST API (`make serve`, or `python -m serve --model {where}`):",
        "",
        "```bash",
        "curl -s localhost:8000/api/v1/generate -H 'content-type: application/json' \\",
        """     -d '{"upper": "春风得意马蹄疾", "n": 5}'""",
        "```",
        "",
        "Python (the service the site and the command line stand on; the engine decodes as the site",
        "does, int8 on ONNX Runtime, its exported graphs kept in `work/cache/onnx`):",
        "",
        "```python",
        "from pathlib import Path",
        "",
        "from data.paths import graph_cache_dir",
        "from duilian.inputs import make_query",
        "from duilian.service import Engine, LoadedModel",
        "from model.decoding.options import SERVE_INT8, SERVE_RUNTIME",
        "",
        "engine = Engine(SERVE_INT8, SERVE_RUNTIME, graph_cache_dir())",
        f'model = LoadedModel.load(Path("{where}"), engine=engine)',
        'answer = model.answer(make_query("春风得意马蹄疾", n=5))',
        "for c in answer.candidates:",
        "    print(c.text, c.rank_score, c.report.hard_ok)",
        "```",
        "",
        "or the decoder alone (`model.store.bundle.load_bundle`, `duilian.engine.build_decoder`):",
        "",
        "```python",
        "from data.paths import graph_cache_dir",
        "from duilian.engine import Engine, build_decoder",
        "from model.decoding.options import SERVE_INT8, SERVE_RUNTIME, DecodeOptions",
        "from model.store.bundle import load_bundle",
        "",
        f'bundle = load_bundle("{where}")',
        "engine = Engine(SERVE_INT8, SERVE_RUNTIME, graph_cache_dir())",
        "decoder = build_decoder(bundle, engine, bundle.blocked)",
        'for c in decoder.generate("春风得意马蹄疾", DecodeOptions(n_best=5)).candidates:',
        "    print(c.text, c.score)",
        "```",
        "",
    ]


def with_header(card: str, bundle: Path) -> str:
    """``card`` with its front matter and "How to use" section rendered again (added when it
    has none: the front matter first, the section before the first ``## `` heading)."""
    body = card
    if body.startswith("---\n"):
        end = body.find("\n---\n", 4)
        if end >= 0:
            body = body[end + len("\n---\n") :].lstrip("\n")
    lines = body.split("\n")
    if HOW_TO_USE in lines:  # drop the old section, up to the next heading of its level
        start = lines.index(HOW_TO_USE)
        stop = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
        lines = lines[:start] + lines[stop:]
    at = next((i for i, line in enumerate(lines) if line.startswith("## ")), len(lines))
    lines = lines[:at] + how_to_use(bundle) + lines[at:]
    ev = read_json(bundle / "eval.json")
    return "\n".join([*front_matter(ev), *lines])


def rewrite_header(bundle: Path) -> int:
    """``--header-only``: the card's front matter and "How to use" rendered again in place."""
    path = bundle / "MODEL_CARD.md"
    try:
        card = path.read_text(encoding="utf-8") if path.is_file() else ""
        path.write_text(with_header(card, bundle), encoding="utf-8")
    except (OSError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"wrote the front matter and '{HOW_TO_USE[3:]}' of {path}")
    return 0
