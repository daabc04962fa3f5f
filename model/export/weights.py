"""A bundle's models from and to PyTorch, in the format model/store/weights.py reads without
it: ``save_model_files`` writes a model's weights (fp16, or int8 rows with their scales) and its
configuration, ``load_model_files`` builds the model back from them."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors.torch import save

from data.vocab import Vocab
from model.net.checkpoint import CoupletModel, build_model
from model.net.scorer import PairScorer
from model.spec.config import ModelConfig
from model.store.weights import (
    DIGEST_KEY,
    FORMAT,
    INT8_MIN_SIZE,
    SCALE_SUFFIX,
    WEIGHT_DTYPES,
    array_digest,
    canonical_header,
    check_vocab,
    config_meta,
    read_config,
    read_model_arrays,
    shared_files,
    vocab_sha256,
)


def tied_aliases(state: dict[str, torch.Tensor]) -> dict[str, str]:
    """{key: the earlier key it shares its tensor with} over a state dict, in its order."""
    first: dict[tuple[int, tuple[int, ...], torch.dtype], str] = {}
    aliases: dict[str, str] = {}
    for key, t in state.items():
        ident = (t.data_ptr(), tuple(t.shape), t.dtype)
        if ident in first:
            aliases[key] = first[ident]
        else:
            first[ident] = key
    return aliases


def tensor_digest(tensors: dict[str, torch.Tensor]) -> str:
    """``array_digest`` of PyTorch tensors (what a weights file's metadata carries)."""
    return array_digest({k: t.numpy() for k, t in tensors.items()})


def model_config_json(
    model: CoupletModel | PairScorer,
    vocab: Vocab,
    vocab_file: str,
    weights_file: str,
    training: dict[str, Any],
    shared: dict[str, str] | None = None,
    dtype: str = "float16",
) -> dict[str, Any]:
    """What ``<config>.json`` holds for ``model`` (see the module's docstring)."""
    return {
        "architectures": [type(model).__name__],
        "model_type": "duilian-couplet",
        **model.cfg.to_dict(),
        "torch_dtype": dtype,
        "tied_weights": tied_aliases(model.state_dict()),
        **({"shared_weights": dict(shared)} if shared else {}),
        "weights_file": weights_file,
        "weights_format": FORMAT,
        "vocab_file": vocab_file,
        "vocab_sha256": vocab_sha256(vocab),
        "training": training,
    }


def quantize_rows(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(int8 values, float32 scales of shape (rows, 1)) of the matrix ``w``: each row scaled so
    that its largest magnitude is 127, rounded to the nearest (an all-zero row has scale 1)."""
    w = w.detach().float()
    top = w.abs().amax(dim=1, keepdim=True)
    scale = torch.where(top > 0, top / 127.0, torch.ones_like(top))
    return torch.round(w / scale).clamp_(-127, 127).to(torch.int8), scale


def stored_tensors(
    state: dict[str, torch.Tensor], leave_out: set[str], dtype: str = "float16"
) -> dict[str, torch.Tensor]:
    """The tensors a weights file stores for ``state`` (less ``leave_out``), in ``dtype``
    (``float16``, or ``int8``: see the module's docstring)."""
    if dtype not in WEIGHT_DTYPES:
        raise ValueError(f"weights dtype {dtype!r}: choose from {', '.join(WEIGHT_DTYPES)}")
    tensors: dict[str, torch.Tensor] = {}
    for key, value in state.items():
        if key in leave_out:
            continue
        v = value.detach().cpu()
        if dtype == "int8" and v.is_floating_point() and v.dim() == 2 and v.numel() >= INT8_MIN_SIZE:
            tensors[key], tensors[key + SCALE_SUFFIX] = quantize_rows(v)
        else:
            tensors[key] = v.half() if v.is_floating_point() else v
    return {k: v.contiguous() for k, v in tensors.items()}


def read_model_tensors(path: Path) -> dict[str, torch.Tensor]:
    """A weights file's tensors, checked and dequantised (``read_model_arrays``), as PyTorch's."""
    return {k: torch.from_numpy(np.array(v)) for k, v in read_model_arrays(path).items()}


def save_model_files(
    model: CoupletModel | PairScorer,
    vocab: Vocab,
    weights: Path,
    config: Path,
    vocab_file: str,
    training: dict[str, Any],
    shared: dict[str, str] | None = None,
    dtype: str = "float16",
) -> None:
    """Write ``model``'s weights in ``dtype`` (float16 or int8) to ``weights`` and its
    configuration to ``config`` (``vocab_file``: the sentencepiece file's name beside them,
    which the caller writes; ``shared``: {key: the weights file beside it that holds that
    tensor}, left out here)."""
    state = model.state_dict()
    aliases = tied_aliases(state)
    tensors = stored_tensors(state, set(aliases) | set(shared or {}), dtype)
    blob = save(tensors, metadata={"format": "pt", DIGEST_KEY: tensor_digest(tensors)})
    weights.write_bytes(canonical_header(blob))
    os.chmod(weights, 0o644)  # whatever the umask: a server running as another user must read it
    text = json.dumps(
        model_config_json(model, vocab, vocab_file, weights.name, training, shared, dtype),
        ensure_ascii=False,
        indent=1,
    )
    config.write_text(text + "\n", encoding="utf-8")


def load_model_files(
    weights: Path,
    config_path: Path,
    vocab: Vocab,
    dtype: torch.dtype | None = None,
    shared: dict[str, dict[str, torch.Tensor]] | None = None,
) -> tuple[CoupletModel, dict[str, Any]]:
    """(the model in eval mode, its meta) from ``weights`` and ``config_path``, on ``vocab``
    (ValueError when the configuration names another vocabulary, or the tensors do not fit it).
    ``shared``: {weights file name: its tensors} for the tensors the configuration's
    ``shared_weights`` takes from another model's file (read from beside ``weights`` when not
    given)."""
    dtype = torch.float32 if dtype is None else dtype
    config = read_config(config_path)
    check_vocab(config, vocab, config_path)
    model = build_model(ModelConfig.from_dict(config))
    tensors = read_model_tensors(weights)
    shared = dict(shared or {})
    for name in shared_files(config, config_path):
        if name not in shared:
            shared[name] = read_model_tensors(weights.parent / name)
    for key, name in (config.get("shared_weights") or {}).items():
        if key not in shared[name]:
            raise ValueError(f"{config_path}: shares {key!r} with {name}, which has no such tensor")
        tensors[key] = shared[name][key]
    own = tied_aliases(model.state_dict())
    if config.get("tied_weights", {}) != own:
        tied = config.get("tied_weights")
        raise ValueError(f"{config_path}: tied weights {tied} differ from the model's {own}")
    state = {k: (v.to(dtype) if v.is_floating_point() else v) for k, v in tensors.items()}
    try:
        result = model.load_state_dict(state, strict=False)
    except RuntimeError as e:  # a tensor of another shape
        raise ValueError(f"{weights}: does not fit {config_path}: {' '.join(str(e).split())[:300]}") from e
    if set(result.missing_keys) != set(own) or result.unexpected_keys:
        missing = sorted(set(result.missing_keys) - set(own))
        extra = result.unexpected_keys
        raise ValueError(f"{weights}: does not fit {config_path} (missing {missing}, extra {extra})")
    return model.to(dtype).eval(), config_meta(config)


def same_weights(a: CoupletModel, b: CoupletModel) -> bool:
    """Whether two models hold the same configuration and bit-identical tensors."""
    sa, sb = a.state_dict(), b.state_dict()
    return (
        a.cfg == b.cfg
        and sa.keys() == sb.keys()
        and all(sa[k].dtype == sb[k].dtype and torch.equal(sa[k], sb[k]) for k in sa)
    )
