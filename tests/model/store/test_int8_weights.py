"""Bundle weights in int8 (model/store/weights.py): what is stored, what loads back, a bundle
rewritten in place, and damage refused."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file, save_file

from data.vocab import Vocab
from model.export.models import models_of
from model.export.weights import quantize_rows, stored_tensors, tensor_digest
from model.net.checkpoint import CorruptCheckpoint
from model.net.tagger import CoupletTagger
from model.net.transformer import CoupletTransformer, ModelConfig
from model.release.bundle_cli import main as bundle_main
from model.release.export import export_bundle, quantize_bundle
from model.store.bundle import check_models, head_weight_t, load_bundle
from model.store.layout import (
    CONFIG_FILE,
    PROPOSER_WEIGHTS,
    REVERSE_WEIGHTS,
    WEIGHTS_FILE,
    BundleError,
    read_manifest,
    verify_bundle,
    write_manifest,
)
from model.store.weights import DIGEST_KEY, INT8_MIN_SIZE, SCALE_SUFFIX
from tests.model.decoding.fixtures import reverse_of


def wide_model(vocab: Vocab) -> CoupletTransformer:
    """Wide enough that its attention and feed-forward matrices are quantized (>= INT8_MIN_SIZE)."""
    torch.manual_seed(3)
    cfg = ModelConfig(vocab_size=len(vocab), d_model=64, n_heads=4, n_enc_layers=1, n_dec_layers=1, d_ff=128)
    return CoupletTransformer(cfg).eval()


def export(out: Path, model: CoupletTransformer, vocab: Vocab, pairs, **kw) -> Path:
    cfg = ModelConfig(vocab_size=len(vocab), d_model=64, n_heads=4, n_enc_layers=1, d_ff=128, kind="tagger")
    proposer, reverse = CoupletTagger(cfg), reverse_of(model)
    return export_bundle(out, model, vocab, train_pairs=pairs, proposer=proposer, reverse=reverse, **kw)


def test_rows_are_scaled_to_127_and_round_to_the_nearest() -> None:
    w = torch.tensor([[0.5, -1.0, 0.25], [0.0, 0.0, 0.0], [3.0, 1.0, -2.9]])
    q, scale = quantize_rows(w)
    assert q.dtype == torch.int8 and scale.shape == (3, 1)
    assert q[0].tolist() == [64, -127, 32] and q[2].tolist() == [127, 42, -123]
    assert q[1].tolist() == [0, 0, 0] and scale[1].item() == 1.0  # an all-zero row
    assert torch.all((q.float() * scale - w).abs() <= scale / 2 + 1e-7)


def test_an_int8_bundle_stores_its_matrices_in_int8_and_loads_close_to_the_model(
    tmp_path: Path, vocab: Vocab, pairs
) -> None:
    model = wide_model(vocab)
    half = export(tmp_path / "fp16", model, vocab, pairs)
    small = export(tmp_path / "int8", model, vocab, pairs, weights_dtype="int8")
    raw = load_file(small / WEIGHTS_FILE)
    quantized = {k for k, v in raw.items() if v.dtype == torch.int8}
    state = model.state_dict()
    want = {k for k in raw if k in state and state[k].dim() == 2 and state[k].numel() >= INT8_MIN_SIZE}
    assert quantized == want and "embed.weight" in quantized  # the tied table, once
    assert all(raw[k + SCALE_SUFFIX].dtype == torch.float32 for k in quantized)
    rest = [v for k, v in raw.items() if k not in quantized and SCALE_SUFFIX not in k]
    assert all(v.dtype == torch.float16 for v in rest)
    assert json.loads((small / CONFIG_FILE).read_text("utf-8"))["torch_dtype"] == "int8"
    for name in (WEIGHTS_FILE, PROPOSER_WEIGHTS, REVERSE_WEIGHTS):  # every model of the bundle
        assert (small / name).stat().st_size < 0.65 * (half / name).stat().st_size, name
    loaded = models_of(load_bundle(small))
    got = loaded.model.state_dict()
    for key in quantized:  # each weight within half a step of its row's scale
        step = state[key].abs().amax(dim=1, keepdim=True) / 127
        assert torch.all((got[key] - state[key]).abs() <= step / 2 + 1e-6), key
    src = torch.tensor([vocab.encode("明月松间照")])
    tgt = torch.tensor([[vocab.bos_id, *vocab.encode("清泉石上流")]])
    with torch.no_grad():
        torch.testing.assert_close(loaded.model(src, tgt), model(src, tgt), atol=0.05, rtol=0.05)
    assert loaded.reverse is not None and torch.equal(loaded.reverse.embed.weight, loaded.model.embed.weight)
    assert loaded.proposer is not None
    # the decoder on ONNX Runtime reads the output layer without PyTorch: the same values
    assert np.allclose(head_weight_t(small), got["head.weight"].numpy().T, atol=1e-6)


def test_a_bundle_is_rewritten_in_int8_in_place(tmp_path: Path, vocab: Vocab, pairs, capsys) -> None:
    model = wide_model(vocab)
    out = export(tmp_path / "b", model, vocab, pairs, step=7)
    before = models_of(load_bundle(out))
    fp16 = {k: v.clone() for k, v in before.model.state_dict().items()}
    assert bundle_main(["--quantize", str(out)]) == 0
    said = capsys.readouterr().out
    assert "rewrote model.safetensors, proposer.safetensors, reverse.safetensors in int8" in said, said
    assert verify_bundle(out) and set(read_manifest(out) or {}) >= {WEIGHTS_FILE, REVERSE_WEIGHTS}
    after = load_bundle(out)
    assert after.meta["step"] == 7 and models_of(after).reverse is not None
    assert any(v.dtype == torch.int8 for v in load_file(out / REVERSE_WEIGHTS).values())
    got = models_of(after).model.state_dict()
    assert all(torch.allclose(got[k], fp16[k], atol=float(fp16[k].abs().max()) / 127) for k in fp16)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b"]  # no temporary folder left
    with pytest.raises(BundleError, match="in int8 already"):
        quantize_bundle(out)
    assert bundle_main(["--quantize", str(out)]) == 1


def test_a_scale_that_does_not_fit_its_matrix_is_refused(tmp_path: Path, vocab: Vocab, pairs) -> None:
    out = export(tmp_path / "b", wide_model(vocab), vocab, pairs, weights_dtype="int8")
    tensors = load_file(out / WEIGHTS_FILE)
    key = next(k for k in tensors if k.endswith(SCALE_SUFFIX))
    tensors[key] = tensors[key][:-1].contiguous()  # one row short
    save_file(tensors, out / WEIGHTS_FILE, metadata={"format": "pt", DIGEST_KEY: tensor_digest(tensors)})
    write_manifest(out)  # made so, not damaged afterwards: the sums agree, the tensors do not
    with pytest.raises(CorruptCheckpoint, match=rf"{SCALE_SUFFIX} does not fit an int8 matrix"):
        models_of(load_bundle(out))  # read into PyTorch
    with pytest.raises(CorruptCheckpoint, match=rf"{SCALE_SUFFIX} does not fit an int8 matrix"):
        check_models(out)  # the server's check before it starts, without PyTorch
    with pytest.raises(ValueError, match="weights dtype 'int4'"):
        stored_tensors({}, set(), "int4")
