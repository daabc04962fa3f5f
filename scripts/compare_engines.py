"""How far the served engines' top lines are from the exact model's.

Decodes test upper lines as the site does (every rule, the proposer, the filters) with eager
PyTorch in fp32 (the exact model), ONNX Runtime in fp32 and in int8, and with ``--torchscript``
also int8 graphs from PyTorch's TorchScript-based exporter (the one used until session 18,
deprecated); for each engine, the share of top lines equal to the exact model's and the exact
model's perplexity of the (upper, top line) pairs (lower: the search found lines the model
itself likes more). Graphs are exported afresh (no cache).

    python scripts/compare_engines.py --limit 300 [--torchscript] [--out work/engines.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import warnings
from pathlib import Path
from typing import Any

from data.paths import corpus_dir, default_model_dir
from duilian.engine import Engine
from duilian.inputs import Query
from duilian.service import LoadedModel
from model.export.models import models_of
from model.release.metrics import perplexity


def torchscript_export(module: Any, args: Any, inputs: list[str], outputs: list[str], axes: Any) -> bytes:
    """The graph as PyTorch's TorchScript-based exporter writes it (opset 17)."""
    import torch

    with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # deprecated, kept in 2.13
        path = Path(tmp, "graph.onnx")
        torch.onnx.export(
            module.eval(), args, path, input_names=inputs, output_names=outputs,
            dynamic_axes=axes, opset_version=17, dynamo=False,
        )  # fmt: skip
        return path.read_bytes()


def tops(model: LoadedModel, uppers: list[str]) -> list[str]:
    out = []
    for start in range(0, len(uppers), 8):
        for a in model.answer_batch([Query(u, 10) for u in uppers[start : start + 8]], 2):
            out.append("" if isinstance(a, Exception) or not a.candidates else a.candidates[0].text)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", type=Path, default=default_model_dir())
    p.add_argument("--test", type=Path, default=corpus_dir() / "wb14123_test.tsv")
    p.add_argument("--limit", type=int, default=300)
    p.add_argument("--torchscript", action="store_true", help="also int8 graphs of the old exporter")
    p.add_argument("--out", type=Path)
    args = p.parse_args(argv)
    lines = args.test.read_text(encoding="utf-8").splitlines()[: args.limit]
    uppers = [line.split("\t")[0] for line in lines]
    engines = {
        "eager_fp32": Engine(False, "torch"),
        "onnx_fp32": Engine(False, "onnx"),
        "onnx_int8": Engine(True, "onnx"),
    }
    found: dict[str, list[str]] = {}
    exact: LoadedModel | None = None
    for name, engine in engines.items():
        model = LoadedModel.load(args.model, engine=engine)
        exact = exact or model
        found[name] = tops(model, uppers)
    if args.torchscript:
        import model.export.onnx_export as onnx_export

        exporter, onnx_export._export = onnx_export._export, torchscript_export  # type: ignore[assignment]
        try:
            found["onnx_int8_torchscript"] = tops(
                LoadedModel.load(args.model, engine=Engine(True, "onnx")), uppers
            )
        finally:
            onnx_export._export = exporter
    assert exact is not None
    bundle, n = exact.bundle, len(uppers)
    summary = {
        name: {
            "same_top_as_eager_fp32": round(
                sum(a == b for a, b in zip(lines_, found["eager_fp32"], strict=True)) / n, 4
            ),
            "eager_fp32_perplexity_of_tops": perplexity(
                models_of(bundle).model,
                bundle.vocab,
                [(u, t) for u, t in zip(uppers, lines_, strict=True) if t],
            ),
        }
        for name, lines_ in found.items()
    }
    if args.torchscript:
        same = sum(a == b for a, b in zip(found["onnx_int8"], found["onnx_int8_torchscript"], strict=True))
        summary["onnx_int8"]["same_top_as_torchscript_int8"] = round(same / n, 4)
    print(json.dumps({"lines": n, **summary}, indent=1))
    if args.out is not None:
        args.out.write_text(
            json.dumps({"uppers": uppers, **found, "summary": summary}, ensure_ascii=False), "utf-8"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
