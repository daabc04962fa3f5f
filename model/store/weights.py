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
  (``array_digest``: the bytes ``model.net.checkpoint.payload_digest`` feeds for them by name),
  checked on load, so a damaged file is refused even in a bundle without SHA256SUMS.
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

This module reads the format with numpy alone (what serving needs: a configuration, the
arrays a decoder on ONNX Runtime reads, the check of every file before a server starts);
model/export/weights.py writes it from PyTorch models and builds them from it. Training
checkpoints stay ``torch.save`` dicts (model/net/checkpoint.py: optimizer state, resuming);
only bundles use this format. The lent GPU machine's image has no safetensors, and nothing
there imports this module (tests/model/training/test_imports.py).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np
from safetensors import SafetensorError, safe_open
from safetensors.numpy import load_file

from data.vocab import Vocab
from model.spec.config import CorruptCheckpoint, ModelConfig

FORMAT = "duilian-safetensors-1"
DIGEST_KEY = "payload_sha256"
WEIGHT_DTYPES = ("float16", "int8")
SCALE_SUFFIX = "@scale"  # an int8 tensor's scales: ``<key>@scale``, float32, one per row
INT8_MIN_SIZE = 4096  # smaller tensors (norms, biases, the register table) stay fp16
# the names payload_digest gives the dtypes (PyTorch's), so a digest does not depend on the reader
_DTYPE_NAMES = {
    n: f"torch.{n}" for n in ("float16", "float32", "float64", "int8", "uint8", "int32", "int64", "bool")
}


def array_digest(arrays: dict[str, np.ndarray]) -> str:
    """The sha256 (hex) of a weights file's tensors by name: the bytes that
    ``model.net.checkpoint.payload_digest`` feeds for the same tensors as a dict in key order
    (so the files written before this reader still match)."""
    h = hashlib.sha256()
    h.update(f"D{len(arrays)};".encode())
    for key in sorted(arrays):
        name = key.encode("utf-8", "surrogatepass")
        h.update(f"S{len(name)};".encode())
        h.update(name)
        a = np.ascontiguousarray(arrays[key])
        h.update(f"T{_DTYPE_NAMES[a.dtype.name]}{tuple(a.shape)};".encode())
        h.update(a.reshape(-1).view(np.uint8).data)
    return h.hexdigest()


def vocab_sha256(vocab: Vocab) -> str:
    return hashlib.sha256(vocab.to_bytes()).hexdigest()


def dequantized(arrays: dict[str, np.ndarray], path: Path) -> dict[str, np.ndarray]:
    """``arrays`` as read from ``path`` with each int8 matrix multiplied back by its scales
    (``<key>@scale``) into float32; ``CorruptCheckpoint`` when a scale has no matrix or does
    not fit it."""
    out = {k: v for k, v in arrays.items() if not k.endswith(SCALE_SUFFIX)}
    for key in (k for k in arrays if k.endswith(SCALE_SUFFIX)):
        name, scale = key[: -len(SCALE_SUFFIX)], arrays[key]
        q = out.get(name)
        if q is None or q.dtype != np.int8 or q.ndim != 2 or tuple(scale.shape) != (q.shape[0], 1):
            raise CorruptCheckpoint(f"{path}: {key} does not fit an int8 matrix {name}")
        out[name] = q.astype(np.float32) * scale.astype(np.float32)
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


def read_header(path: Path) -> dict[str, Any]:
    """A safetensors file's header: 8 bytes of its length, then JSON (the tensors' dtypes,
    shapes and offsets, and ``__metadata__``); OSError or ValueError when it cannot be read."""
    with open(path, "rb") as f:
        size = int.from_bytes(f.read(8), "little")
        header: dict[str, Any] = json.loads(f.read(size))
    return header


def read_tensors(path: Path) -> dict[str, np.ndarray]:
    """The arrays of a safetensors file as stored (fp16, int8 and its scales), checked against
    the digest in its metadata; ``CorruptCheckpoint`` (one line naming the file) when it does
    not load or does not match."""
    if not path.is_file():
        raise FileNotFoundError(f"{path}: missing")
    try:
        arrays = load_file(path)
        header = read_header(path)
    except (SafetensorError, OSError, ValueError, RuntimeError) as e:
        text = " ".join(str(e).split())[:200]
        raise CorruptCheckpoint(f"{path}: not a safetensors file ({type(e).__name__}: {text})") from e
    want = (header.get("__metadata__") or {}).get(DIGEST_KEY)
    if want is not None:
        got = array_digest(arrays)
        if got != want:
            raise CorruptCheckpoint(
                f"{path}: damaged weights: their sha256 is {got[:16]}..., not the {want[:16]}... "
                "written with them"
            )
    return arrays


def read_model_arrays(path: Path) -> dict[str, np.ndarray]:
    """A weights file's tensors, checked and dequantised (``read_tensors``, ``dequantized``)."""
    return dequantized(read_tensors(path), path)


def shared_files(config: dict[str, Any], path: Path) -> set[str]:
    """The weights files a configuration takes shared tensors from (``shared_weights``);
    ValueError naming ``path`` when that entry is not a {key: file name} mapping."""
    shared = config.get("shared_weights") or {}
    if not isinstance(shared, dict) or not all(isinstance(v, str) and "/" not in v for v in shared.values()):
        raise ValueError(f"{path}: shared_weights must map tensor names to weights files beside it")
    return set(shared.values())


def stored_shapes(path: Path) -> dict[str, tuple[int, ...]]:
    """{name: shape} of the tensors a safetensors file stores (its header alone; scales left out)."""
    try:
        header = read_header(path)
    except (OSError, ValueError) as e:
        raise CorruptCheckpoint(f"{path}: not a safetensors file ({type(e).__name__})") from e
    return {
        k: tuple(v["shape"])
        for k, v in header.items()
        if k != "__metadata__" and not k.endswith(SCALE_SUFFIX)
    }


def count_parameters(config: dict[str, Any], config_path: Path, own: bool = False) -> int:
    """A model's parameter count from its files' headers (its configuration at ``config_path``
    names its weights file): the tensors it stores, each tied one once, and with ``own=False``
    those it shares from another file of the bundle too (a scorer's ``own``: without the
    character table it shares, frozen)."""
    folder = config_path.parent
    shapes = stored_shapes(folder / config["weights_file"])
    if not own:
        for key, name in (config.get("shared_weights") or {}).items():
            shapes[key] = stored_shapes(folder / name)[key]
    return sum(int(np.prod(shape)) for shape in shapes.values())


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
