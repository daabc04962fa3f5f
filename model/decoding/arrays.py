"""The few array operations the search needs that numpy does not name: ``topk`` (PyTorch's,
best first) and ``log_softmax`` (whole or at some columns). The search runs on numpy arrays
(float32 scores, int64 tokens): its steps are small, and a numpy operation on them costs a few
hundred nanoseconds where a PyTorch one costs microseconds; serving then needs no PyTorch at all."""

from __future__ import annotations

import numpy as np


def log_softmax(x: np.ndarray, axis: int = -1) -> np.ndarray:
    """log(softmax(x)) along ``axis``, in x's precision; a row that is all -inf stays -inf."""
    top = np.max(x, axis=axis, keepdims=True)
    top = np.where(np.isfinite(top), top, 0).astype(x.dtype)
    shifted = x - top
    return shifted - np.log(np.sum(np.exp(shifted), axis=axis, keepdims=True))


def log_softmax_at(x: np.ndarray, columns: np.ndarray) -> np.ndarray:
    """``log_softmax(x)[:, columns]`` for x (B, V), to the bit, without the whole (B, V) result."""
    top = np.max(x, axis=-1, keepdims=True)
    top = np.where(np.isfinite(top), top, 0).astype(x.dtype)
    return (x[:, columns] - top) - np.log(np.sum(np.exp(x - top), axis=-1, keepdims=True))


def topk(x: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` largest values along the last axis, best first, and their indices
    (k <= the axis's size). Equal values among those kept come lowest index first; which of
    several equal to the k-th are kept is not specified (as with PyTorch's ``topk``)."""
    size = x.shape[-1]
    if k >= size:
        order = np.argsort(-x, axis=-1, kind="stable")[..., :k]
    else:
        part = np.argpartition(-x, k - 1, axis=-1)[..., :k]
        part.sort(axis=-1)  # (equal values: lowest index first after the stable sort below)
        order = np.take_along_axis(
            part, np.argsort(-np.take_along_axis(x, part, -1), axis=-1, kind="stable"), -1
        )
    return np.take_along_axis(x, order, -1), order
