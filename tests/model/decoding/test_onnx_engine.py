"""The ONNX Runtime engine: the same numbers as the PyTorch models, and a decoder on it
that gives the same lines (fp32) and keeps every hard rule (int8)."""

from __future__ import annotations

import multiprocessing
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from data.paths import graph_cache_dir
from data.rules import check
from data.vocab import BOS_ID, EOS_ID, PAD_ID, UNK_ID, Vocab
from model.decoding.decoder import Decoder
from model.decoding.onnx_engine import GraphCache
from model.decoding.options import DecodeOptions
from model.decoding.search import BeamSearch, run_search
from model.decoding.shortlist import Shortlist
from model.export.engines import onnx_copy, torch_decoder
from model.export.graphs import build_graph
from model.export.onnx_export import model_key
from model.export.torch_engine import wrap
from model.net.checkpoint import build_model
from model.net.tagger import CoupletTagger
from model.net.transformer import CoupletTransformer, ModelConfig
from model.spec.capabilities import LOG_PROBS
from tests.model.decoding.fixtures import DEEP, decode_vocab

UPPERS = ["春风得意", "天对地，雨对风。", "上海自来水来自海上", "山山水水", "海纳百川有容乃大"]


@pytest.fixture(scope="module")
def vocab(tmp_path_factory: pytest.TempPathFactory, pairs: list[tuple[str, str]]) -> Vocab:
    return decode_vocab(tmp_path_factory.mktemp("onnx_vocab"), pairs)


def models(vocab: Vocab, aligned: bool = True, seed: int = 5) -> tuple[CoupletTransformer, CoupletTagger]:
    torch.manual_seed(seed)
    cfg = ModelConfig(vocab_size=len(vocab), aligned=aligned, **DEEP)
    s2s, tagger = build_model(cfg), build_model(cfg.with_(kind="tagger"))
    assert isinstance(s2s, CoupletTransformer) and isinstance(tagger, CoupletTagger)
    return s2s.eval(), tagger.eval()


def tokens(rows: list[int] | list[list[int]]) -> np.ndarray:
    """The engine's tokens: an int64 array."""
    return np.array(rows, dtype=np.int64)


def of(t: torch.Tensor) -> np.ndarray:
    """A PyTorch model's output as the engine gives it: a float32 array."""
    out = t.detach().numpy()
    assert out.dtype == np.float32
    return out


@pytest.mark.slow
@pytest.mark.parametrize("aligned", [True, False])
def test_engine_steps_match_the_models_cached_steps(vocab: Vocab, aligned: bool) -> None:
    """Encoder, KV-cached steps with beams reordered between them, the teacher-forced
    states, the output layer over them and the tagger's pass: within float
    rounding of PyTorch (the engine on arrays, the model on tensors)."""
    s2s, tagger = models(vocab, aligned)
    engine = onnx_copy(s2s, cache_dir=graph_cache_dir())
    assert LOG_PROBS in engine.capabilities
    src = tokens([vocab.encode("海纳百川"), vocab.encode("春风得意")])
    src_t = torch.from_numpy(src)
    indices = [[0, 0, 1], [2, 1, 0], [1, 1, 2], [0, 2, 2], [0, 1, 2]]
    with torch.inference_mode():
        memory_t = s2s.encode(src_t)
        memory = of(memory_t)
        encoded = engine.encode(src)
        assert encoded.dtype == np.float32 and np.allclose(encoded, memory, atol=1e-5)
        ours, theirs = engine.new_cache(memory, src, len(indices)), s2s.new_cache(memory_t, src_t)
        prev = np.full((2,), BOS_ID, dtype=np.int64)
        for pos, index in enumerate(indices):
            prev_t = torch.from_numpy(prev)
            a, b = engine.step_states(ours, prev, pos), of(s2s.step_states(theirs, prev_t, pos))
            assert np.allclose(a, b, atol=1e-5), pos
            # the engine's step is normalised (``LOG_PROBS``: a LogSoftmax graph after the output layer)
            want = of(torch.log_softmax(s2s.step(theirs, prev_t, pos), dim=-1))
            assert np.allclose(engine.step(ours, prev, pos), want, atol=1e-4)
            # the first reorder widens 2 rows to 3, later ones move beams
            parent = np.array(index, dtype=np.int64)
            ours, theirs = (
                engine.reorder_cache(ours, parent),
                s2s.reorder_cache(theirs, torch.from_numpy(parent)),
            )
            prev = tokens(vocab.encode("江山如"))
        tgt_in = tokens([[BOS_ID, *vocab.encode("江山如")], [BOS_ID, *vocab.encode("秋月无")]])
        want_t = s2s.decode_states(memory_t, src_t, torch.from_numpy(tgt_in))
        states = engine.decode_states(memory, src, tgt_in)  # normalised, as the output layer reads them
        assert np.allclose(states, of(s2s.dec_norm(want_t)), atol=1e-5)
        # the output layer over teacher-forced states, flattened to (B*T, d) as ``rescore`` gives
        # them (the head graph takes rows of states)
        flat, flat_t = states.reshape(-1, states.shape[-1]), want_t.reshape(-1, want_t.shape[-1])
        assert np.allclose(engine.head(flat), of(s2s.logits(flat_t)), atol=1e-4)
        onnx_tagger = onnx_copy(tagger, cache_dir=graph_cache_dir())
        assert np.allclose(onnx_tagger.logits(src), of(tagger.encode(src_t)), atol=1e-4)
        # both engines' lattices (the steps over them are lattice.py's, tests/model/net/test_tagger.py)
        assert np.allclose(onnx_tagger.encode(src), wrap(tagger).encode(src), atol=1e-4)


def test_a_step_scoring_a_shortlist_in_the_graph_matches_pytorchs_output_layer(vocab: Vocab) -> None:
    """``step_log_probs``: the step and the output layer over each request's list (lists of
    different lengths, so one is padded) equal the step's states through ``Shortlist.log_probs``,
    and the caches advance alike."""
    s2s, _ = models(vocab)
    engine = onnx_copy(s2s, cache_dir=graph_cache_dir())
    src = tokens([vocab.encode("海纳百川"), vocab.encode("春风得意")])
    ids = [[EOS_ID, *vocab.encode("江山如画")], vocab.encode("秋月无边")]
    shortlist = Shortlist.build(ids, s2s.head.weight.detach().numpy())
    memory = engine.encode(src)
    ours, theirs = engine.new_cache(memory, src, 3), engine.new_cache(memory, src, 3)
    prev = np.full((2,), BOS_ID, dtype=np.int64)
    for pos in range(3):
        got = engine.step_log_probs(ours, prev, pos, shortlist.listed)
        want = shortlist.log_probs(engine.step_states(theirs, prev, pos))
        assert got.shape == want.shape == (2, 5)
        assert np.array_equal(np.isinf(got), np.isinf(want)) and bool(np.isinf(got[1, 4]))
        assert np.allclose(got[np.isfinite(got)], want[np.isfinite(want)], atol=1e-5), pos
        assert all(np.allclose(a, b, atol=1e-6) for a, b in zip(ours.k, theirs.k, strict=True))
        prev = tokens(vocab.encode("江山如")[pos : pos + 1] * 2)


def test_engine_refuses_padded_sources(vocab: Vocab) -> None:
    """The graphs take no source mask, so every way in refuses padding instead of attending to it."""
    s2s, tagger = models(vocab)
    engine = onnx_copy(s2s, cache_dir=graph_cache_dir())
    src = tokens([vocab.encode("海纳百川"), [*vocab.encode("春风"), PAD_ID, PAD_ID]])
    with torch.inference_mode():
        memory = of(s2s.encode(torch.from_numpy(src)))
    for way_in in (
        lambda: engine.encode(src),
        lambda: engine.new_cache(memory, src, 4),
        lambda: onnx_copy(tagger, cache_dir=graph_cache_dir()).encode(src),
    ):
        with pytest.raises(ValueError, match="unpadded"):
            way_in()


def test_beam_search_on_the_engine_equals_pytorch(vocab: Vocab) -> None:
    s2s, _ = models(vocab)
    src = tokens([vocab.encode("海纳百川")])
    table = np.zeros((1, 5, s2s.cfg.vocab_size), np.float32)
    table[0, :4, [PAD_ID, BOS_ID, EOS_ID, UNK_ID]] = float("-inf")  # no special token inside the line
    table[0, 4] = float("-inf")
    table[0, 4, EOS_ID] = 0.0
    a = run_search(onnx_copy(s2s, cache_dir=graph_cache_dir()), src, table, [], BeamSearch(6))
    b = run_search(wrap(s2s), src, table, [], BeamSearch(6))  # PyTorch's model on the same arrays
    assert a[0].tolist() == b[0].tolist()
    assert np.allclose(a[2], b[2], atol=1e-4)


@pytest.mark.parametrize(
    "options",
    [
        DecodeOptions(n_best=5),
        DecodeOptions(n_best=5, shortlist=0),
        DecodeOptions(n_best=5, fast=True, proposals=12),
        DecodeOptions(n_best=5, fast=True, score_end=True),
        DecodeOptions(n_best=5, score_end=True),
        DecodeOptions(n_best=4, locks="__春_____", required_chars="月"),
    ],
    ids=["shortlist", "every token", "fast", "fast, end scored", "end scored", "locks"],
)
def test_decoder_on_onnx_gives_pytorchs_lines(vocab: Vocab, options: DecodeOptions) -> None:
    s2s, tagger = models(vocab)
    eager = torch_decoder(s2s, vocab, proposer=tagger)
    onnx = torch_decoder(s2s, vocab, proposer=tagger, runtime="onnx", graph_cache=graph_cache_dir())
    uppers = UPPERS if options.locks is None else ["海纳百川有容乃大"]
    for upper in uppers:
        want, got = eager.generate(upper, options), onnx.generate(upper, options)
        assert [c.text for c in got.candidates] == [c.text for c in want.candidates], upper
        for g, w in zip(got.candidates, want.candidates, strict=True):
            assert g.score == pytest.approx(w.score, abs=1e-4)


@pytest.mark.slow
def test_int8_onnx_decoder_keeps_the_rules_and_close_scores(vocab: Vocab) -> None:
    s2s, tagger = models(vocab)
    decoder = torch_decoder(
        s2s, vocab, int8=True, proposer=tagger, runtime="onnx", graph_cache=graph_cache_dir()
    )
    for options in (DecodeOptions(n_best=5), replace(DecodeOptions(n_best=5), fast=True)):
        for upper in UPPERS:
            for c in decoder.generate(upper, options).candidates:
                assert check(upper, c.text).hard_ok, (upper, c.text)
    # the model's own log-probability of its top line, exactly: int8 stays close to it
    top = decoder.generate("海纳百川", DecodeOptions(n_best=1, shortlist=0)).candidates[0]
    with torch.inference_mode():
        ids = vocab.encode(top.text)
        logits = s2s(torch.tensor([vocab.encode("海纳百川")]), torch.tensor([[BOS_ID, *ids[:-1]]]))
        logp = F.log_softmax(logits[0].float(), -1)
    exact = float(sum(logp[i, t] for i, t in enumerate(ids))) / len(ids)
    assert top.score == pytest.approx(exact, abs=0.1)


def test_an_unknown_runtime_is_refused(vocab: Vocab) -> None:
    s2s, _ = models(vocab)
    with pytest.raises(ValueError, match="runtime must be one of torch, onnx"):
        torch_decoder(s2s, vocab, runtime="tensorrt")  # type: ignore[arg-type]  # deliberately not a Runtime


def _answers(decoder: Decoder) -> list[list[tuple[str, float, float]]]:
    options = DecodeOptions(n_best=5)
    return [
        [(c.text, c.score, c.rank_score) for c in decoder.generate(u, options).candidates] for u in UPPERS
    ]


@pytest.mark.slow
def test_cached_graphs_decode_exactly_as_freshly_exported_ones(vocab: Vocab, tmp_path: Path) -> None:
    """The first decoder on an empty folder exports its graphs and writes them; the second reads
    them and decodes alike."""
    s2s, tagger = models(vocab)
    first = torch_decoder(s2s, vocab, int8=True, proposer=tagger, runtime="onnx", graph_cache=tmp_path)
    # (beside them their export locks, and the traced templates where this process traced them)
    written = sorted(p.name for p in tmp_path.glob("*.onnx") if not p.name.startswith("template-"))
    # the six graphs of the encoder-decoder (the full-vocabulary output layer one of them) and the tagger's
    assert len(written) == 7
    assert {name.split("-")[0] for name in written} == {
        "encode",
        "prepare",
        "step",
        "scored_step",
        "decode_states",
        "head",
        "tag",
    }
    graphs = {p.name: p.read_bytes() for p in tmp_path.glob("*.onnx")}
    second = torch_decoder(s2s, vocab, int8=True, proposer=tagger, runtime="onnx", graph_cache=tmp_path)
    assert {p.name: p.read_bytes() for p in tmp_path.glob("*.onnx")} == graphs  # read, not written again
    assert _answers(second) == _answers(first)  # the very scores, not close ones


@pytest.mark.slow
def test_the_cache_key_follows_the_weights_and_a_damaged_graph_is_replaced(
    vocab: Vocab, tmp_path: Path
) -> None:
    s2s, _ = models(vocab)
    other, _ = models(vocab, seed=6)
    mine, theirs = GraphCache(tmp_path, model_key(s2s)), GraphCache(tmp_path, model_key(other))
    assert mine.path("step", True) != theirs.path("step", True)
    assert mine.path("step", True) != mine.path("step", False)
    # this model's graphs, as the run's folder has them (exported there once), in a folder of the test's own
    fresh = _answers(torch_decoder(s2s, vocab, runtime="onnx", graph_cache=graph_cache_dir()))
    run = GraphCache(graph_cache_dir(), mine.key)
    for name in ("encode", "prepare", "step", "scored_step", "decode_states", "head"):
        mine.path(name, False).write_bytes(run.path(name, False).read_bytes())
    step = mine.path("step", False)
    step.write_bytes(b"not a graph")
    assert _answers(torch_decoder(s2s, vocab, runtime="onnx", graph_cache=tmp_path)) == fresh
    assert step.read_bytes() != b"not a graph"


def _cache_of(folder: Path) -> GraphCache:
    torch.manual_seed(0)
    return GraphCache(folder, model_key(torch.nn.Linear(4, 4)))  # the same key in every process


def _write_often(folder: Path, fill: bytes, times: int) -> None:
    cache = _cache_of(folder)
    for _ in range(times):
        cache.write("step", True, fill * (1 << 20))


def _identity_graph() -> bytes:
    from onnx import TensorProto, helper

    value = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1]) for n in ("x", "y")]
    graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "g", value[:1], value[1:])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model.SerializeToString()


def _build_counting(folder: Path, exports: Path, together: Any) -> None:
    def export() -> bytes:
        with exports.open("a") as f:
            f.write("exported\n")
        time.sleep(1.0)  # (the other process asks meanwhile)
        return _identity_graph()

    together.wait()
    graph = build_graph(export, False, 1, _cache_of(folder), "step")
    assert graph.arrays(np.ones(1, np.float32))[0].tolist() == [1.0]


@pytest.mark.slow
def test_two_processes_wanting_one_missing_entry_export_it_once(tmp_path: Path) -> None:
    """Two real processes (two decode workers, two test workers) start on an empty cache at once:
    one exports the graph, the other waits for it and reads it."""
    context = multiprocessing.get_context("spawn")
    together, exports = context.Barrier(2), tmp_path / "exports.txt"
    builders = [context.Process(target=_build_counting, args=(tmp_path, exports, together)) for _ in range(2)]
    for b in builders:
        b.start()
    for b in builders:
        b.join()
        assert b.exitcode == 0
    assert exports.read_text().splitlines() == ["exported"]


@pytest.mark.slow
def test_two_processes_writing_one_entry_at_once_leave_it_whole(tmp_path: Path) -> None:
    """Two real processes rewrite the same entry (as two decode workers starting together) while
    this one reads it: every read is one writer's whole graph, never a mix or a part, and no
    temporary file is left behind."""
    context = multiprocessing.get_context("spawn")
    writers = [context.Process(target=_write_often, args=(tmp_path, fill, 40)) for fill in (b"a", b"b")]
    for w in writers:
        w.start()
    cache, whole, reads = _cache_of(tmp_path), {b"a" * (1 << 20), b"b" * (1 << 20)}, 0
    while any(w.is_alive() for w in writers) or reads == 0:
        got = cache.read("step", True)
        if got is not None:
            assert got in whole, (len(got), got[:1], got[-1:])
            reads += 1
    for w in writers:
        w.join()
        assert w.exitcode == 0
    assert [p.name for p in tmp_path.iterdir()] == [cache.path("step", True).name]


@pytest.mark.slow
def test_the_int8_tagger_quantises_every_product_with_a_weight_its_tied_head_too(vocab: Vocab) -> None:
    import onnx

    _, tagger = models(vocab)
    assert tagger.cfg.tie_embeddings  # the head's weight is the embedding's
    onnx_copy(tagger, int8=True, cache_dir=graph_cache_dir())
    graph = onnx.load_from_string(GraphCache(graph_cache_dir(), model_key(tagger)).read("tag", True) or b"")
    weights = {w.name for w in graph.graph.initializer}
    ops = [n.op_type for n in graph.graph.node]
    linears = sum(isinstance(m, torch.nn.Linear) for m in tagger.modules())
    # every linear layer, the head included, is an int8 product; what stays in fp32 multiplies
    # activations by activations (attention), never by a weight
    assert ops.count("MatMulInteger") == linears
    assert not [n for n in graph.graph.node if n.op_type == "MatMul" and set(n.input) & weights]


@pytest.mark.slow
def test_an_int8_graph_is_quantised_from_the_cached_fp32_one_without_an_export(
    vocab: Vocab, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the fp32 graph in the cache, the int8 one is its quantisation, with no export; a
    damaged fp32 file is exported again instead."""
    import model.export.graphs as graphs_module
    import model.export.onnx_export as export_module

    _, tagger = models(vocab, seed=8)
    fp32 = onnx_copy(tagger, cache_dir=tmp_path)
    cache = GraphCache(tmp_path, model_key(tagger))
    src = tokens([vocab.encode("海纳百川")])

    def no_export(*args: Any, **kwargs: Any) -> bytes:
        raise AssertionError("exported")

    with monkeypatch.context() as patch:
        patch.setattr(export_module, "_export", no_export)
        int8 = onnx_copy(tagger, int8=True, cache_dir=tmp_path)
    assert cache.read("tag", True) == graphs_module._quantised(cache.read("tag", False) or b"")
    assert np.allclose(int8.logits(src), fp32.logits(src), atol=0.5)
    cache.path("tag", True).unlink()
    cache.path("tag", False).write_bytes(b"not a graph")
    again = onnx_copy(tagger, int8=True, cache_dir=tmp_path)  # exported, as without the fp32 graph
    assert np.array_equal(again.logits(src), int8.logits(src))
