"""The chunked cross-entropy gives F.cross_entropy's value and gradient."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from model.training import losses
from model.training.losses import cross_entropy


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("smoothing", [0.0, 0.1])
@pytest.mark.parametrize("scale", [1.0, 3.0])  # 1.0: the gradient is handed on unscaled
def test_matches_torch(
    dtype: torch.dtype, smoothing: float, scale: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(losses, "ROWS", 16)  # several blocks, the last one short
    torch.manual_seed(0)
    logits = (3 * torch.randn(150, 97)).to(dtype).requires_grad_(True)
    targets = torch.randint(1, 97, (150,))
    targets[::7] = 0  # ignored rows
    mine = cross_entropy(logits, targets, 0, smoothing)
    (grad_mine,) = torch.autograd.grad(scale * mine, logits)
    ref = F.cross_entropy(logits.float(), targets, ignore_index=0, label_smoothing=smoothing)
    (grad_ref,) = torch.autograd.grad(scale * ref, logits)
    assert mine.dtype == torch.float32
    assert mine.item() == pytest.approx(ref.item(), rel=1e-5)
    assert grad_mine.dtype == dtype
    tol = 1e-6 if dtype == torch.float32 else 2e-4
    torch.testing.assert_close(grad_mine.float(), grad_ref.float(), atol=tol, rtol=1e-2)
    assert grad_mine[::7].abs().max() == 0  # ignored rows get no gradient


def test_all_rows_ignored_gives_zero() -> None:
    logits = torch.randn(4, 10, requires_grad=True)
    loss = cross_entropy(logits, torch.zeros(4, dtype=torch.long), 0)
    loss.backward()
    assert loss.item() == 0.0 and logits.grad is not None and logits.grad.abs().max() == 0


def test_bad_shapes_are_refused() -> None:
    with pytest.raises(ValueError, match="logits"):
        cross_entropy(torch.randn(2, 3, 4), torch.zeros(2, dtype=torch.long), 0)


def test_without_gradient_the_value_is_the_same() -> None:
    torch.manual_seed(1)
    logits = torch.randn(40, 13)
    targets = torch.randint(0, 13, (40,))
    with torch.no_grad():
        mine = cross_entropy(logits, targets, 0, 0.1)
    ref = F.cross_entropy(logits, targets, ignore_index=0, label_smoothing=0.1)
    assert mine.item() == pytest.approx(ref.item(), rel=1e-6)


def test_a_second_backward_is_refused() -> None:
    logits = torch.randn(5, 7, requires_grad=True)
    loss = cross_entropy(logits, torch.arange(5), 0)
    loss.backward(retain_graph=True)
    with pytest.raises(RuntimeError, match="twice"):
        loss.backward()


def _distillation_reference(
    logits: torch.Tensor, teacher: torch.Tensor, targets: torch.Tensor, weight: float, smoothing: float
) -> torch.Tensor:
    keep = targets != 0
    ce = F.cross_entropy(logits.float(), targets, ignore_index=0, label_smoothing=smoothing)
    theirs = teacher[keep].float().log_softmax(-1)
    kl = F.kl_div(logits[keep].float().log_softmax(-1), theirs, reduction="batchmean", log_target=True)
    return (1 - weight) * ce + weight * kl


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize(("weight", "smoothing"), [(0.5, 0.0), (0.3, 0.1), (1.0, 0.0), (0.0, 0.0)])
def test_distillation_matches_cross_entropy_plus_kl(
    dtype: torch.dtype, weight: float, smoothing: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(losses, "ROWS", 16)
    torch.manual_seed(2)
    logits = (3 * torch.randn(150, 97)).to(dtype).requires_grad_(True)
    teacher = (4 * torch.randn(150, 97)).to(dtype)
    targets = torch.randint(1, 97, (150,))
    targets[::5] = 0
    mine = losses.distillation(logits, teacher, targets, 0, weight, smoothing)
    (grad_mine,) = torch.autograd.grad(2.0 * mine, logits)
    ref = _distillation_reference(logits, teacher, targets, weight, smoothing)
    (grad_ref,) = torch.autograd.grad(2.0 * ref, logits)
    assert mine.item() == pytest.approx(ref.item(), rel=1e-5)
    tol = 1e-6 if dtype == torch.float32 else 2e-4
    torch.testing.assert_close(grad_mine.float(), grad_ref.float(), atol=tol, rtol=1e-2)
    assert grad_mine[::5].abs().max() == 0
    with torch.no_grad():
        assert losses.distillation(logits, teacher, targets, 0, weight, smoothing).item() == pytest.approx(
            ref.item(), rel=1e-5
        )


def test_distillation_against_itself_is_the_entropy_gap_only() -> None:
    # KL(p || p) = 0: with weight 1 and the teacher's own logits, the loss is zero, as is the gradient
    logits = torch.randn(30, 11, requires_grad=True)
    loss = losses.distillation(logits, logits.detach().clone(), torch.randint(1, 11, (30,)), 0, 1.0)
    loss.backward()
    assert abs(loss.item()) < 1e-6
    assert logits.grad is not None and logits.grad.abs().max() < 1e-7


def test_distillation_refuses_teacher_logits_of_another_shape() -> None:
    with pytest.raises(ValueError, match="differ from the model"):
        losses.distillation(torch.randn(4, 7), torch.randn(4, 8), torch.zeros(4, dtype=torch.long), 0, 0.5)
