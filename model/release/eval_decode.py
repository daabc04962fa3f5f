"""What the evaluation decodes with: a model loaded from a bundle or a checkpoint (with the
bundle's proposer and pairing table), and the top candidate of the decoder for each line.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tqdm import tqdm

from data.pairing import PairingTable
from data.paths import graph_cache_dir
from data.vocab import Vocab
from model.decoding.options import SERVE_INT8, SERVE_RUNTIME, Runtime
from model.decoding.reranking import Reranker
from model.export.engines import reranker_of, torch_decoder
from model.export.models import load_models, models_of, scorer_of
from model.net.checkpoint import CoupletModel, load_model
from model.net.checkpoint import load_proposer as checkpoint_proposer
from model.store.bundle import decoder_graph_keys, load_bundle, scorer_graph_key, scorer_weight
from model.store.layout import verify_bundle
from model.training.greedy import greedy

Decode = Callable[[list[str]], list[str]]


def make_decoder(
    model: CoupletModel,
    vocab: Vocab,
    options: Any,
    use_greedy: bool,
    proposer: Any = None,
    int8: bool = SERVE_INT8,
    runtime: Runtime = SERVE_RUNTIME,
    pairing: PairingTable | None = None,
    progress: bool | None = None,
    desc: str = "decoding the test set",
    graph_keys: tuple[str | None, str | None] = (None, None),
    reranker: Reranker | None = None,
) -> Decode:
    """Top candidate of ``model.decoding.decoder.Decoder`` (or plain greedy decoding when asked),
    with a ``proposer`` (an encoder-only tagger) beside the model; ``int8``: quantised copies;
    ``runtime``: what runs them (model.decoding.options.RUNTIMES). ``progress``: a tqdm bar of
    the lines decoded on stderr (None: when stderr is a terminal), named ``desc``; ``graph_keys``:
    the keys of the model's and the proposer's cached graphs (``load_keyed``); ``reranker``: a
    bundle's reranker (``bundle_reranker_at``), as the site decodes."""
    if use_greedy:

        def plain(uppers: list[str]) -> list[str]:
            with bar(len(uppers), progress, desc) as shown:
                out = greedy(model, vocab, uppers)
                shown.update(len(uppers))
            return out

        return plain
    decoder = torch_decoder(
        model,
        vocab,
        int8=int8,
        proposer=proposer,
        runtime=runtime,
        pairing=pairing,
        graph_cache=graph_cache_dir(),
        graph_keys=graph_keys,
        reranker=reranker,
    )

    def one(upper: str) -> str:
        try:
            result = decoder.generate(upper, options)
        except ValueError as e:  # e.g. a ConstraintError: counted as an empty, failing output
            print(f"note: no output for {upper!r}: {e}", file=sys.stderr)
            return ""
        return result.candidates[0].text if result.candidates else ""

    def top(uppers: list[str]) -> list[str]:
        out: list[str] = []
        with bar(len(uppers), progress, desc) as shown:
            for i in range(0, len(uppers), 64):
                chunk = uppers[i : i + 64]
                try:
                    results = decoder.generate_batch(chunk, options)
                except ValueError:  # one impossible line: decode this chunk line by line
                    out.extend(one(u) for u in chunk)
                else:
                    out.extend(r.candidates[0].text if r.candidates else "" for r in results)
                shown.update(len(chunk))
        return out

    return top


def bar(total: int, progress: bool | None, desc: str) -> tqdm:
    """tqdm's bar of ``total`` lines on stderr; ``progress`` None: only on a terminal."""
    hidden = None if progress is None else not progress  # tqdm's None: hidden unless a terminal
    return tqdm(total=total, desc=desc, unit="line", file=sys.stderr, disable=hidden)


def load_any(path: Path, reverse: bool = False) -> tuple[Any, Vocab, Any, PairingTable | None]:
    """A bundle folder or a checkpoint file -> (model, vocabulary, the bundle's proposer and
    pairing table, or None for each); ``reverse``: a bundle's lower_to_upper model instead, with
    no proposer and its pairing table read the other way (ValueError when it has none)."""
    model, vocab, proposer, pairing, _ = load_keyed(path, reverse)
    return model, vocab, proposer, pairing


Keys = tuple[str | None, str | None]


def load_keyed(path: Path, reverse: bool = False) -> tuple[Any, Vocab, Any, PairingTable | None, Keys]:
    """``load_any`` and the keys under which the site caches a bundle's graphs
    (``bundle.decoder_graph_keys``), so that a decoder here reads the graphs the site exported;
    (None, None) for a checkpoint (keyed by its weights in memory)."""
    if path.is_dir():
        b = load_bundle(path)
        if reverse:
            if models_of(b).reverse is None:
                raise ValueError(f"{path}: the bundle has no reverse model (reverse.safetensors)")
            swapped = None if b.pairing is None else b.pairing.swapped()
            return models_of(b).reverse, b.vocab, None, swapped, decoder_graph_keys(b, reverse=True)
        return models_of(b).model, b.vocab, models_of(b).proposer, b.pairing, decoder_graph_keys(b)
    model, vocab, _ = load_model(path)
    return model, vocab, None, None, (None, None)


def bundle_reranker_at(path: Path) -> Reranker | None:
    """The reranker of the bundle at ``path`` as the site runs it (its graph cached under the
    site's key, its weight the bundle's); None for a checkpoint or a bundle without one."""
    if not path.is_dir():
        return None
    b = load_bundle(path)
    key = scorer_graph_key(b)
    scorer = scorer_of(b)
    if key is None or scorer is None:
        return None
    return reranker_of(scorer, b.vocab, graph_cache_dir(), key, scorer_weight(path))


def load_proposer(path: Path, vocab: Vocab) -> Any:
    """An encoder-only tagger from a checkpoint (or a bundle's model), on the same vocabulary."""
    if not path.is_dir():
        return checkpoint_proposer(path, vocab)
    verify_bundle(path)
    model, its_vocab, _ = load_models(path)
    if model.cfg.kind != "tagger":
        raise ValueError(f"{path}: a proposer must be an encoder-only tagger, not a {model.cfg.kind} model")
    if not its_vocab.same_as(vocab):
        raise ValueError(f"{path}: the proposer's vocabulary differs from the model's")
    return model
