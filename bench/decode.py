"""Decoding speed: one request for 10 candidates with every couplet rule on (p50 / p99 in
ms over upper lines from the test set), and lines per second decoding the test set in batches.

The model is the shipped default bundle when there is one, else a randomly initialised
model of the ``cpu`` preset's size (the speed of a step does not depend on the weights).
Upper lines come from the wb14123 test set when the corpus is present, else from the test
fixtures. Goal (docs/MEASUREMENTS.md): p50 <= 15 ms, p99 <= 50 ms on a 2-core machine.

Seven decoders: the served one (the encoder-decoder's beam search with the bundle's tagger as
a second opinion and its shortlist of tokens for the output layer, in ``SERVE_INT8``'s
precision, on ``SERVE_RUNTIME``), the same without the shortlist, the same in the other
precision, the same in eager PyTorch (when the served runtime is another), its diverse
search (the web page's default request), the fast mode
(the tagger's one-pass proposals rescored by the encoder-decoder), and the encoder-decoder
alone (eager fp32, every token scored). The served decoder reranks with the bundle's reranker
when it has one (model/decoding/reranking.py); ``no_rerank_`` is the same search without it.
Without a bundled tagger, a random one of the ``tagger`` preset's size stands in (same cost).
When the bundle has a reverse model (下联求上联), its served decoder too (``reverse_``: upper
lines for the test set's lower lines, no tagger).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import cast

import torch

from data.pairing import PairingTable
from data.paths import ROOT, corpus_dir, data_dir, default_model_dir, graph_cache_dir
from data.vocab import Vocab
from duilian.engine import set_decode_threads
from model.decoding.decoder import Decoder
from model.decoding.options import DIVERSE_PENALTY, SERVE_INT8, SERVE_RUNTIME, DecodeOptions
from model.decoding.plan import ConstraintError
from model.decoding.reranking import Reranker
from model.export.engines import torch_decoder
from model.export.models import models_of
from model.net.tagger import CoupletTagger
from model.net.transformer import CoupletTransformer, ModelConfig
from model.release.eval_decode import bundle_reranker_at
from model.store.bundle import load_bundle
from model.store.layout import has_model
from model.training.presets import PRESETS

FIXTURE = ROOT / "tests" / "model" / "fixtures" / "couplets50.tsv"
PRESET = PRESETS / "cpu.json"
TAGGER_PRESET = PRESETS / "tagger.json"


def upper_lines(column: int = 0) -> tuple[list[str], str]:
    """The test set's upper lines (``column`` 1: its lower lines), and the file's name."""
    test = corpus_dir() / "wb14123_test.tsv"
    path = test if test.is_file() else FIXTURE
    rows = [row.split("\t") for row in path.read_text(encoding="utf-8").splitlines() if row.strip()]
    return [row[column] for row in rows], path.name


def reverse_decoder() -> Decoder | None:
    """The shipped bundle's reverse model as served (None without one)."""
    if not has_model(default_model_dir()):
        return None
    b = load_bundle(default_model_dir())
    reverse = models_of(b).reverse
    if reverse is None:
        return None
    pairing = None if b.pairing is None else b.pairing.swapped()
    cache = graph_cache_dir()
    return torch_decoder(
        reverse, b.vocab, SERVE_INT8, runtime=SERVE_RUNTIME, pairing=pairing, graph_cache=cache
    )


@dataclass
class Loaded:
    """The encoder-decoder and what the site decodes it with."""

    model: CoupletTransformer
    vocab: Vocab
    proposer: CoupletTagger | None = None
    pairing: PairingTable | None = None
    reranker: Reranker | None = None


def load_decoder() -> tuple[Loaded, str]:
    """The shipped bundle's models, else a random model of the ``cpu`` preset's size."""
    if has_model(default_model_dir()):
        b = load_bundle(default_model_dir())
        models = models_of(b)
        model = cast(CoupletTransformer, models.model)
        return Loaded(model, b.vocab, models.proposer, b.pairing, bundle_reranker_at(b.path)), "shipped"
    spm = data_dir() / "spm.model"
    if spm.is_file():
        vocab = Vocab.from_file(spm)
    else:
        lines, _ = upper_lines()
        vocab = Vocab.train(lines, Path(tempfile.mkdtemp()) / "spm", vocab_size=0, minloglevel=2)
    preset = json.loads(PRESET.read_text())["model"]
    torch.manual_seed(0)
    cfg = ModelConfig.from_dict({**preset, "vocab_size": max(8000, len(vocab))})
    return Loaded(CoupletTransformer(cfg).eval(), vocab), "random (cpu preset size)"


def proposer_for(loaded: Loaded) -> tuple[CoupletTagger, str]:
    """The bundle's proposer, else a random tagger of the ``tagger`` preset's size."""
    if loaded.proposer is not None:
        return loaded.proposer, "shipped"
    preset = json.loads(TAGGER_PRESET.read_text())["model"]
    torch.manual_seed(0)
    cfg = ModelConfig.from_dict({**preset, "vocab_size": loaded.model.cfg.vocab_size})
    return CoupletTagger(cfg).eval(), "random (tagger preset size)"


def latencies(decoder: Decoder, uppers: list[str], options: DecodeOptions) -> tuple[list[float], list[float]]:
    """Wall and CPU milliseconds per request. On a shared machine the CPU time of a
    one-thread request is what its wall time would be on a free core."""
    for upper in uppers[:5]:  # warm-up
        decoder.generate(upper, options)
    wall, cpu = [], []
    for upper in uppers:
        start, start_cpu = time.perf_counter(), time.process_time()
        decoder.generate(upper, options)
        wall.append((time.perf_counter() - start) * 1000)
        cpu.append((time.process_time() - start_cpu) * 1000)
    return wall, cpu


def feasible(decoder: Decoder, upper: str, options: DecodeOptions) -> bool:
    try:
        decoder.plan(upper, options)
    except ConstraintError:  # e.g. 春 in the upper line, or 春 would have to end the line
        return False
    return True


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def run(args: argparse.Namespace) -> dict[str, object]:
    quick = bool(getattr(args, "quick", False))
    threads = torch.get_num_threads()
    loaded, model_kind = load_decoder()
    proposer, proposer_kind = proposer_for(loaded)
    model, vocab, pairing, cache = loaded.model, loaded.vocab, loaded.pairing, graph_cache_dir()
    decoder = torch_decoder(model, vocab, pairing=pairing, reranker=loaded.reranker)  # eager fp32, alone
    served = torch_decoder(
        model,
        vocab,
        SERVE_INT8,
        proposer,
        runtime=SERVE_RUNTIME,
        pairing=pairing,
        graph_cache=cache,
        reranker=loaded.reranker,
    )
    other = torch_decoder(
        model, vocab, not SERVE_INT8, proposer, runtime=SERVE_RUNTIME, pairing=pairing, graph_cache=cache
    )
    normal = DecodeOptions(n_best=10)
    variants = {
        "": (served, normal),
        "full_vocab_": (served, replace(normal, shortlist=0)),
        "fp32_" if SERVE_INT8 else "int8_": (other, normal),
        "diverse_": (served, replace(normal, diversity=DIVERSE_PENALTY)),
        "fast_": (served, replace(normal, fast=True)),
        "model_only_": (decoder, normal),
    }
    if loaded.reranker is not None:  # what the bundle's reranker costs: the served search without it
        variants["no_rerank_"] = (served, replace(normal, rerank_weight=0.0))
    if SERVE_RUNTIME != "torch":
        variants["torch_"] = (torch_decoder(model, vocab, SERVE_INT8, proposer, pairing=pairing), normal)
    uppers, source = upper_lines()
    n = 100 if quick else 1000
    first = DecodeOptions(n_best=10, required_first="春")
    spring = [u for u in uppers[:400] if feasible(decoder, u, first)]
    batch = uppers[: 300 if quick else 1000]
    figures: dict[str, object] = {"model": model_kind, "lines_from": source, "requests": n}
    figures["served_int8"] = SERVE_INT8
    figures["served_runtime"] = SERVE_RUNTIME
    figures["proposer"] = proposer_kind
    figures["params_m"] = round(sum(p.numel() for p in model.parameters()) / 1e6, 2)
    blas = set_decode_threads(1)  # one thread per request: the service runs decodes side by side
    try:
        for name, (dec, options) in variants.items():
            wall, cpu = latencies(dec, uppers[:n], options)
            figures[f"{name}latency_p50_ms"] = round(statistics.median(wall), 2)
            figures[f"{name}latency_p99_ms"] = round(percentile(wall, 0.99), 2)
            figures[f"{name}latency_cpu_p50_ms"] = round(statistics.median(cpu), 2)
            figures[f"{name}latency_cpu_p99_ms"] = round(percentile(cpu, 0.99), 2)
        reverse = reverse_decoder()
        if reverse is not None:
            lowers = upper_lines(column=1)[0][:n]
            wall, cpu = latencies(reverse, lowers, normal)
            figures["reverse_latency_p50_ms"] = round(statistics.median(wall), 2)
            figures["reverse_latency_p99_ms"] = round(percentile(wall, 0.99), 2)
            figures["reverse_latency_cpu_p50_ms"] = round(statistics.median(cpu), 2)
            figures["reverse_latency_cpu_p99_ms"] = round(percentile(cpu, 0.99), 2)
        wall, cpu = latencies(served, spring[: 30 if quick else 200], first)
        figures["required_first_latency_cpu_p50_ms"] = round(statistics.median(cpu), 2)
        for name, (dec, options) in variants.items():
            if options.diversity:  # one candidate per line: a plain search
                continue
            start = time.perf_counter()
            dec.generate_batch(batch, replace(options, n_best=1, beam_size=10), batch_size=32)
            figures[f"{name}batch_lines_per_s"] = round(len(batch) / (time.perf_counter() - start), 1)
    finally:
        torch.set_num_threads(threads)
        blas.restore_original_limits()
    figures["batch_lines"] = len(batch)
    figures["load_average_1min"] = round(os.getloadavg()[0], 2)  # the machine is shared: read figures with it
    return figures
