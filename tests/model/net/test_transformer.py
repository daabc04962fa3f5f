from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from model.net.transformer import BOS_ID, EOS_ID, PAD_ID, CoupletTransformer, ModelConfig, short_attention


def small(aligned: bool = True) -> CoupletTransformer:
    torch.manual_seed(0)
    cfg = ModelConfig(
        vocab_size=60, d_model=32, n_heads=4, n_enc_layers=2, n_dec_layers=2, d_ff=64, max_len=16
    )
    return CoupletTransformer(cfg.with_(aligned=aligned)).eval()


def batch() -> tuple[torch.Tensor, torch.Tensor]:
    src = torch.tensor([[5, 6, 7, 8, PAD_ID, PAD_ID], [9, 10, 11, 12, 13, 14]])  # (2, 6)
    tgt = torch.tensor([[BOS_ID, 20, 21, 22, 23, EOS_ID, PAD_ID], [BOS_ID, 30, 31, 32, 33, 34, 35]])  # (2, 7)
    return src, tgt


@pytest.mark.parametrize("aligned", [True, False])
def test_shapes(aligned: bool) -> None:
    model = small(aligned)
    src, tgt = batch()
    assert model(src, tgt).shape == (2, 7, 60)
    memory = model.encode(src)
    assert memory.shape == (2, 6, 32)
    cache = model.new_cache(memory, src)
    assert model.step(cache, tgt[:, 0], 0).shape == (2, 60)


@pytest.mark.parametrize("aligned", [True, False])
def test_incremental_steps_equal_forward(aligned: bool) -> None:
    model = small(aligned)
    src, tgt = batch()
    with torch.no_grad():
        full = model(src, tgt)  # (2, 7, V)
        cache = model.new_cache(model.encode(src), src)
        steps = torch.stack([model.step(cache, tgt[:, t], t) for t in range(tgt.size(1))], 1)
    torch.testing.assert_close(steps, full, atol=1e-5, rtol=1e-4)


def test_reorder_cache_selects_and_duplicates_rows() -> None:
    model = small()
    src, tgt = batch()
    with torch.no_grad():
        full = model(src, tgt)
        cache = model.new_cache(model.encode(src), src)
        for t in range(3):
            model.step(cache, tgt[:, t], t)
        index = torch.tensor([1, 1, 0])
        cache = model.reorder_cache(cache, index)
        out = model.step(cache, tgt[index, 3], 3)
    torch.testing.assert_close(out, full[index, 3], atol=1e-5, rtol=1e-4)


def test_padding_of_source_does_not_change_outputs() -> None:
    model = small()
    src, tgt = batch()
    with torch.no_grad():
        a = model(src[:1, :4], tgt[:1, :6])
        b = model(src[:1], tgt[:1, :6])
    torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-4)


def test_aligned_variant_uses_source_position() -> None:
    """Changing the source character at position 2 changes the aligned decoder input at position 2."""
    model = small(aligned=True)
    src, _ = batch()
    other = src.clone()
    other[0, 2] = 40
    with torch.no_grad():
        memory, memory2 = model.encode(src), model.encode(other)
        a = model._aligned(memory, src, 7)
        b = model._aligned(memory2, other, 7)
    assert a is not None and b is not None
    assert a.shape == (2, 7, 32)
    assert not torch.allclose(a[0, 2], b[0, 2])
    assert torch.count_nonzero(a[0, 4:]) == 0  # past the source (padding) nothing is added


def test_config_round_trip() -> None:
    cfg = ModelConfig(d_model=48, aligned=False)
    assert ModelConfig.from_dict(cfg.to_dict()) == cfg


def test_step_rejects_position_past_max_len() -> None:
    model = small()
    src, _ = batch()
    cache = model.new_cache(model.encode(src), src)
    with pytest.raises(ValueError):
        model.step(cache, torch.tensor([BOS_ID, BOS_ID]), 16)


def test_untrained_model_predicts_near_uniform() -> None:
    """The tied output layer must not make the untrained model bet on repeating its input."""
    torch.manual_seed(0)
    cfg = ModelConfig(vocab_size=2000, d_model=128, n_heads=4, n_enc_layers=2, n_dec_layers=2, d_ff=256)
    model = CoupletTransformer(cfg).eval()
    src = torch.randint(4, 2000, (16, 8))
    tgt_in = torch.randint(4, 2000, (16, 9))
    with torch.no_grad():
        logp = model(src, tgt_in).log_softmax(-1)  # (B, T, V)
    repeat = -logp.gather(-1, tgt_in.unsqueeze(-1)).mean()
    assert abs(float(repeat) - math.log(2000)) < 1.5


@pytest.mark.parametrize(("causal", "masked"), [(False, True), (True, False), (False, False)])
def test_short_attention_matches_pytorch(causal: bool, masked: bool) -> None:
    torch.manual_seed(0)
    b, h, t, dh = 3, 4, 7, 16
    s = t if causal else 9
    q = torch.randn(b, h, t, dh, requires_grad=True)
    k, v = (torch.randn(b, h, s, dh, requires_grad=True) for _ in range(2))
    mask = None
    if masked:  # rows padded by 3 and by 1 keys
        mask = torch.ones(b, 1, 1, s, dtype=torch.bool)
        mask[1, ..., -3:] = False
        mask[2, ..., -1:] = False
    grad = torch.randn(b, h, t, dh)
    mine = short_attention(q, k, v, mask, causal)
    with sdpa_kernel(SDPBackend.MATH):
        ref = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal)
    torch.testing.assert_close(mine, ref, atol=1e-6, rtol=1e-5)
    ours, theirs = torch.autograd.grad(mine, (q, k, v), grad), torch.autograd.grad(ref, (q, k, v), grad)
    for a, r in zip(ours, theirs, strict=True):
        torch.testing.assert_close(a, r, atol=1e-6, rtol=1e-5)


def test_training_forward_equals_inference_forward() -> None:
    """With autograd on (a training step) attention is ``short_attention``; without, PyTorch's."""
    model = small()
    src, tgt = batch()
    with torch.no_grad():
        ref = model(src, tgt)
    torch.testing.assert_close(model(src, tgt), ref, atol=1e-5, rtol=1e-4)
