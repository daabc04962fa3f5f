"""The keys of the exported ONNX graphs kept between runs (``onnx_engine.GraphCache``), and
what every export shares: the opset. Without PyTorch: a bundle's graphs are keyed by its files
(``files_key``), so an engine is found in the cache before any model is read; an in-memory
model is keyed by its weights (``onnx_export.model_key``), both with ``traced_digest``."""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
from collections.abc import Mapping, Sequence
from pathlib import Path

OPSET = 18  # the torch.export-based exporter writes opset 18 and later
_HERE = Path(__file__).resolve().parent
# The code an exported graph is traced from: a change to any of them makes new cache keys.
_TRACED_SOURCES = (
    _HERE / "onnx_engine.py",
    _HERE / "onnx_graphs.py",
    _HERE / "reranking.py",
    _HERE.parent / "export" / "graphs.py",
    _HERE.parent / "export" / "onnx_export.py",
    _HERE.parent / "export" / "onnx_templates.py",
    _HERE / "graph_keys.py",
    _HERE.parent / "net" / "transformer.py",
    _HERE.parent / "net" / "tagger.py",
    _HERE.parent / "net" / "scorer.py",
    _HERE.parent / "spec" / "config.py",
    _HERE.parent / "spec" / "capabilities.py",
)


def _version(package: str) -> str:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return ""


@functools.lru_cache(maxsize=1)
def traced_digest() -> str:
    """A digest of the traced code and of the exporter's and the runtime's versions."""
    h = hashlib.blake2b(digest_size=16)
    for path in _TRACED_SOURCES:
        h.update(path.read_bytes())
    for package in ("torch", "onnx", "onnxscript", "onnxruntime"):
        h.update(f"{package}={_version(package)};".encode())
    return h.hexdigest()


def files_key(role: str, paths: Sequence[Path], sums: Mapping[str, str] | None = None) -> str:
    """The graph-cache key of a bundle's model ``role`` (``model``, ``proposer``, ``reverse``, ``scorer``)
    read from ``paths`` (its weights and configuration, and any file it shares tensors with):
    their contents, the traced code, the versions. A file named in ``sums`` (its sha256,
    checked against the file already: the bundle's manifest) is not read again."""
    h = hashlib.blake2b(digest_size=16)
    h.update(f"{role};{traced_digest()};".encode())
    for path in paths:
        known = (sums or {}).get(path.name)
        if known is not None:
            h.update(f"{path.name}:sha256:{known}".encode())
        else:
            h.update(f"{path.name}:".encode())
            with open(path, "rb") as f:
                h.update(hashlib.file_digest(f, "blake2b").digest())
    return h.hexdigest()
