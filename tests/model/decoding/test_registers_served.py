"""A model with registers decodes in the register asked for: the ONNX encoder takes the register
as PyTorch's does, the decoder on either runtime gives the same lines in each register, the
registers give different scores, and a model without registers refuses any but the general one."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from data.paths import graph_cache_dir
from data.vocab import Vocab
from model.decoding.options import DecodeOptions
from model.decoding.plan import ConstraintError
from model.decoding.registers import register_index
from model.export.engines import onnx_copy, torch_decoder
from model.net.checkpoint import build_model
from model.net.transformer import CoupletTransformer, ModelConfig
from tests.model.decoding.fixtures import SMALL, decode_vocab

UPPER = "海纳百川有容乃大"


@pytest.fixture(scope="module")
def vocab(tmp_path_factory: pytest.TempPathFactory, pairs: list[tuple[str, str]]) -> Vocab:
    return decode_vocab(tmp_path_factory.mktemp("register_vocab"), pairs)


def registered(vocab: Vocab, n_registers: int = 3) -> CoupletTransformer:
    torch.manual_seed(7)
    model = build_model(ModelConfig(vocab_size=len(vocab), n_registers=n_registers, **SMALL))
    assert isinstance(model, CoupletTransformer)
    if model.register_embed is not None:  # trained registers differ; a fresh model's are zero
        with torch.no_grad():
            model.register_embed.weight.normal_(0.0, 1.0)
    return model.eval()


@pytest.mark.slow
def test_the_onnx_encoder_adds_the_register_as_pytorch_does(vocab: Vocab) -> None:
    model = registered(vocab)
    engine = onnx_copy(model, cache_dir=graph_cache_dir())
    src = np.array([vocab.encode(UPPER)] * 3, dtype=np.int64)
    register = np.array([0, 1, 2], dtype=np.int64)
    want = model.encode(torch.from_numpy(src), torch.from_numpy(register)).detach().numpy()
    got = engine.encode(src, register)
    assert np.allclose(got, want, atol=1e-4)
    assert not np.allclose(got[0], got[2], atol=1e-3)  # the registers change the encoding
    assert np.allclose(engine.encode(src), got[[0, 0, 0]], atol=1e-6)  # no register: general


@pytest.mark.parametrize("register", ["general", "classical", "formal"])
def test_the_decoder_writes_in_the_register_asked_for_on_either_runtime(vocab: Vocab, register: str) -> None:
    model = registered(vocab)
    eager = torch_decoder(model, vocab)
    onnx = torch_decoder(model, vocab, runtime="onnx", graph_cache=graph_cache_dir())
    options = DecodeOptions(n_best=4, register=register)
    want, got = eager.generate(UPPER, options), onnx.generate(UPPER, options)
    assert [c.text for c in got.candidates] == [c.text for c in want.candidates]
    for g, w in zip(got.candidates, want.candidates, strict=True):
        assert g.score == pytest.approx(w.score, abs=1e-4)


def test_registers_change_the_scores_of_the_same_lines(vocab: Vocab) -> None:
    decoder = torch_decoder(registered(vocab), vocab)
    general = decoder.generate(UPPER, DecodeOptions(n_best=4))
    formal = decoder.generate(UPPER, DecodeOptions(n_best=4, register="formal"))
    pairs = [(c.text, c.score) for c in general.candidates]
    assert pairs != [(c.text, c.score) for c in formal.candidates]
    # alternatives read the register too
    lower = general.candidates[0].text
    a = decoder.alternatives(UPPER, lower, 2, DecodeOptions(), k=3)
    b = decoder.alternatives(UPPER, lower, 2, DecodeOptions(register="formal"), k=3)
    assert [x.score for x in a.alternatives] != [x.score for x in b.alternatives]


def test_a_model_without_registers_writes_the_general_one_only(vocab: Vocab) -> None:
    decoder = torch_decoder(registered(vocab, n_registers=0), vocab)
    assert decoder.generate(UPPER, DecodeOptions(n_best=2, register="general")).candidates
    with pytest.raises(ConstraintError, match="formal") as info:
        decoder.generate(UPPER, DecodeOptions(n_best=2, register="formal"))
    assert info.value.constraint == "register" and "语体" in info.value.zh
    with pytest.raises(ConstraintError, match="The register is one of"):
        register_index("solemn", 3)
    assert [register_index(r, 3) for r in ("general", "classical", "formal")] == [0, 1, 2]
