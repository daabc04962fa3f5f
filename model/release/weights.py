"""A bundle's models in the field's format: weights as safetensors, the configuration as JSON.

Each model of a bundle is two files, as a Hugging Face model folder has them:

- ``<stem>.safetensors``: the weights, every tensor stored once: in fp16, or (``dtype="int8"``)
  each floating matrix of at least ``INT8_MIN_SIZE`` elements as int8 with one float32 scale per
  row under ``<key>@scale`` (symmetric: the row's largest magnitude is 127), the rest in fp16;
  the file says which by its scale keys, and loading multiplies them back (``dequantized``).
  int8 halves a model's file (what keeps a 9M-parameter model's bundle within 40 MB); the served
  decoder runs on int8 already (docs/MEASUREMENTS.md, "Bundle weights in int8"). The models
  tie their input embedding and output layer (``ModelConfig.tie_embeddings``: the encoder-decoder's
  ``embed``, ``tgt_embed`` and ``head`` are one table, the tagger's ``embed`` and ``head``), and
  safetensors keeps no aliases, so the tied keys are left out and the model built from the
  configuration ties them again (safetensors' own ``save_model`` / ``load_model`` do the same).
  The file's metadata carries ``format: pt`` and ``payload_sha256``: the sha256 of the tensors
  (``model.net.checkpoint.payload_digest`` of them by name), checked on load, so a damaged file
  is refused even in a bundle without SHA256SUMS.
- A model may leave out tensors that another model of the bundle holds: the lower_to_upper
  model (下联求上联) is trained with the upper_to_lower model's character embeddings frozen
  (``TrainConfig.freeze_embeddings``), so its ``embed.weight`` is that model's, and its
  configuration's ``shared_weights`` says so ({key: the weights file holding it}); the digest
  covers the tensors the file itself stores.
- ``<config>.json``: the ``ModelConfig`` fields at the top (``kind``, ``vocab_size``,
  ``d_model`` ...), ``architectures``, ``torch_dtype``, ``tied_weights`` ({left-out key: the key
  stored}), ``vocab_file`` and ``vocab_sha256`` (the sentencepiece model beside it, which the
  models share), and ``training``: what the checkpoint's other keys said (``step``,
  ``best_valid``, ``preset``, ``sensitive_max_len`` ...).

Training checkpoints stay ``torch.save`` dicts (model/net/checkpoint.py: optimizer state,
resuming); only bundles use this format. The lent GPU machine's image has no safetensors, and
nothing there imports this module (tests/model/training/test_imports.py).
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from safetensors import SafetensorError

from data.vocab import Vocab
from model.net.config import CorruptCheckpoint, ModelConfig

if TYPE_CHECKING:  # (PyTorch is imported where a model is built or written: reading a
    # configuration, or the arrays a decoder on ONNX Runtime needs, does without it)
    import torch

    from model.net.checkpoint import CoupletModel
    from model.net.scorer import PairScorer

FORMAT = "duilian-safetensors-1"
DIGEST_KEY = "payload_sha256"
WEIGHT_DTYPES = ("float16", "int8")
SCALE_SUFFIX = "@scale"  # an int8 tensor's scales: ``<key>@scale``, float32, one per row
INT8_MIN_SIZE = 4096  # smaller tensors (norms, biases, the register table) stay fp16


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


def _digest(tensors: dict[str, torch.Tensor]) -> str:
    from model.net.checkpoint import payload_digest

    return payload_digest({k: tensors[k] for k in sorted(tensors)})


def vocab_sha256(vocab: Vocab) -> str:
    return hashlib.sha256(vocab.to_bytes()).hexdigest()


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
    import torch

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


def dequantized(tensors: dict[str, torch.Tensor], path: Path) -> dict[str, torch.Tensor]:
    """``tensors`` as read from ``path`` with each int8 tensor multiplied back by its scales
    (``<key>@scale``) into float32; ``CorruptCheckpoint`` when a scale has no tensor or does
    not fit it."""
    import torch

    out = {k: v for k, v in tensors.items() if not k.endswith(SCALE_SUFFIX)}
    for key in (k for k in tensors if k.endswith(SCALE_SUFFIX)):
        name, scale = key[: -len(SCALE_SUFFIX)], tensors[key]
        q = out.get(name)
        if q is None or q.dtype != torch.int8 or q.dim() != 2 or tuple(scale.shape) != (q.shape[0], 1):
            raise CorruptCheckpoint(f"{path}: {key} does not fit an int8 matrix {name}")
        out[name] = q.float() * scale.float()
    return out


def canonical_header(blob: bytes) -> bytes:
    """A safetensors file's bytes with its metadata's keys in sorted order: safetensors writes
    them in a random one, so the same tensors gave files with other sums (a bundle exported twice
    differed, and so did the graph-cache keys made of its sums). The header's length stays as it
    was (or grows to the next multiple of 8, as safetensors pads it); the tensors' entries and
    data are unchanged."""
    size = int.from_bytes(blob[:8], "little")
    header = json.loads(blob[8 : 8 + size])
    meta = header.pop("__metadata__", None)
    ordered = ({"__metadata__": dict(sorted(meta.items()))} if meta else {}) | header
    text = json.dumps(ordered, separators=(",", ":"), ensure_ascii=False).encode()
    text = text.ljust(max(size, -(-len(text) // 8) * 8))  # the data's offsets count from its start
    return len(text).to_bytes(8, "little") + text + blob[8 + size :]


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
    from safetensors.torch import save

    state = model.state_dict()
    aliases = tied_aliases(state)
    tensors = stored_tensors(state, set(aliases) | set(shared or {}), dtype)
    blob = save(tensors, metadata={"format": "pt", DIGEST_KEY: _digest(tensors)})
    weights.write_bytes(canonical_header(blob))
    os.chmod(weights, 0o644)  # whatever the umask: a server running as another user must read it
    text = json.dumps(
        model_config_json(model, vocab, vocab_file, weights.name, training, shared, dtype),
        ensure_ascii=False,
        indent=1,
    )
    config.write_text(text + "\n", encoding="utf-8")


def read_config(path: Path) -> dict[str, Any]:
    """A model's ``config.json``; ValueError naming the file when it is not one."""
    if not path.is_file():
        raise FileNotFoundError(f"{path}: missing (the configuration of its .safetensors file)")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise CorruptCheckpoint(f"{path}: not a model configuration ({e})") from e
    if not isinstance(data, dict) or not isinstance(data.get("kind"), str):
        raise CorruptCheckpoint(f"{path}: not a model configuration (no 'kind')")
    if data.get("weights_format") != FORMAT:
        found = data.get("weights_format")
        raise ValueError(f"{path}: unsupported weights format {found!r} (expected {FORMAT})")
    return data


def config_meta(config: dict[str, Any]) -> dict[str, Any]:
    """The bundle's ``meta`` for a model (as a checkpoint's keys gave it): ``model_config`` and
    the training record."""
    cfg = ModelConfig.from_dict(config).to_dict()
    training = config.get("training") or {}
    return {"format_version": FORMAT, "model_config": cfg, **training}


def check_vocab(config: dict[str, Any], vocab: Vocab, path: Path) -> None:
    """ValueError unless ``vocab`` is the vocabulary the configuration ``path`` names."""
    if config.get("vocab_sha256") != vocab_sha256(vocab) or config.get("vocab_size") != len(vocab):
        raise ValueError(f"{path}: the model was made for another vocabulary than {config.get('vocab_file')}")


def read_weights(path: Path) -> dict[str, torch.Tensor]:
    """The tensors of a safetensors file, checked against the digest in its metadata;
    ``CorruptCheckpoint`` (one line naming the file) when it does not load or does not match."""
    from safetensors.torch import load_file

    if not path.is_file():
        raise FileNotFoundError(f"{path}: missing")
    try:
        tensors = load_file(path)
        with open(path, "rb") as f:  # the header: 8 bytes of length, then JSON with __metadata__
            size = int.from_bytes(f.read(8), "little")
            header = json.loads(f.read(size))
    except (SafetensorError, OSError, ValueError, RuntimeError) as e:
        text = " ".join(str(e).split())[:200]
        raise CorruptCheckpoint(f"{path}: not a safetensors file ({type(e).__name__}: {text})") from e
    want = (header.get("__metadata__") or {}).get(DIGEST_KEY)
    if want is not None:
        got = _digest(tensors)
        if got != want:
            raise CorruptCheckpoint(
                f"{path}: damaged weights: their sha256 is {got[:16]}..., not the {want[:16]}... "
                "written with them"
            )
    return tensors


def shared_files(config: dict[str, Any], path: Path) -> set[str]:
    """The weights files a configuration takes shared tensors from (``shared_weights``);
    ValueError naming ``path`` when that entry is not a {key: file name} mapping."""
    shared = config.get("shared_weights") or {}
    if not isinstance(shared, dict) or not all(isinstance(v, str) and "/" not in v for v in shared.values()):
        raise ValueError(f"{path}: shared_weights must map tensor names to weights files beside it")
    return set(shared.values())


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
    import torch

    from model.net.checkpoint import build_model

    dtype = torch.float32 if dtype is None else dtype
    config = read_config(config_path)
    check_vocab(config, vocab, config_path)
    model = build_model(ModelConfig.from_dict(config))
    tensors = dequantized(read_weights(weights), weights)
    shared = dict(shared or {})
    for name in shared_files(config, config_path):
        if name not in shared:
            shared[name] = dequantized(read_weights(weights.parent / name), weights.parent / name)
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


def count_parameters(config: dict[str, Any]) -> int:
    """The model's parameter count from its configuration alone (tied weights counted once; a
    scorer's own, without the table it shares)."""
    from model.net.checkpoint import build_model
    from model.net.scorer import PairScorer

    cfg = ModelConfig.from_dict(config)
    if cfg.kind == "scorer":
        return PairScorer(cfg).num_parameters()
    return int(build_model(cfg).num_parameters())


def same_weights(a: CoupletModel, b: CoupletModel) -> bool:
    """Whether two models hold the same configuration and bit-identical tensors."""
    import torch

    sa, sb = a.state_dict(), b.state_dict()
    return (
        a.cfg == b.cfg
        and sa.keys() == sb.keys()
        and all(sa[k].dtype == sb[k].dtype and torch.equal(sa[k], sb[k]) for k in sa)
    )


def file_names(stem: str) -> tuple[str, str]:
    """The weights and configuration file names of a bundle's model ``stem`` (``model``:
    ``model.safetensors`` and ``config.json``; another: ``<stem>.safetensors`` and
    ``<stem>_config.json``)."""
    return f"{stem}.safetensors", "config.json" if stem == "model" else f"{stem}_config.json"


def read_arrays(path: Path, names: list[str]) -> dict[str, np.ndarray]:
    """Tensors ``names`` of a safetensors file as float32 numpy arrays (an int8 one multiplied
    back by its scales), without PyTorch (what a decoder on ONNX Runtime needs besides its
    graphs: the output layer's weight). The file's sum is the bundle's manifest's to check
    (``verify_bundle``), as when it is loaded whole."""
    from safetensors import safe_open

    try:
        with safe_open(str(path), framework="numpy") as f:
            keys = set(f.keys())
            arrays = {name: f.get_tensor(name).astype(np.float32) for name in names}
            for name in names:
                if name + SCALE_SUFFIX in keys:
                    arrays[name] *= f.get_tensor(name + SCALE_SUFFIX).astype(np.float32)
            return arrays
    except (SafetensorError, OSError, ValueError, KeyError) as e:
        text = " ".join(str(e).split())[:200]
        raise CorruptCheckpoint(f"{path}: not readable ({type(e).__name__}: {text})") from e
