"""Checkpoints: a plain dict carrying everything needed to rebuild the model, written atomically.

Keys: ``format_version``, ``model_config`` (dict), ``vocab`` (sentencepiece bytes),
``state_dict``, ``step``, ``best_valid``, and optional training state (``optimizer``,
``scheduler``, ``rng``, ``trainer``...). No pickled classes: ``torch.load`` runs with
``weights_only=True``.

Every checkpoint written by ``save_checkpoint`` (``save``, the trainer, the bundle, the device
pack) also carries ``payload_sha256``: the sha256 of everything else in the dict, walked in
order (``payload_digest``: each tensor's dtype, shape and bytes, each other value's type and
value). ``load_checkpoint`` recomputes it and refuses a file whose payload does not match
(``CorruptCheckpoint``, naming the file): bytes overwritten inside a tensor, which ``torch.load``
does not notice, are caught this way, and a damaged archive or pickle fails to load at all. The
sum lives inside the file, so the one atomic rename that publishes a checkpoint publishes its
sum too, and the file stays a plain ``torch.load``-able one. A checkpoint without the key
(written before sums) loads unverified; ``verified(ckpt)`` tells which.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any, cast

import torch

from data.files import atomic_file
from data.vocab import Vocab
from model.net.tagger import CoupletTagger
from model.net.transformer import CoupletTransformer, ModelConfig
from model.spec.config import CorruptCheckpoint as CorruptCheckpoint

FORMAT_VERSION = 1
CHECKSUM_KEY = "payload_sha256"


CoupletModel = CoupletTransformer | CoupletTagger
KINDS: dict[str, type[CoupletTransformer] | type[CoupletTagger]] = {
    "seq2seq": CoupletTransformer,
    "tagger": CoupletTagger,
}


def build_model(cfg: ModelConfig) -> CoupletModel:
    """The model of ``cfg.kind``: the encoder-decoder or the encoder-only tagger."""
    if cfg.kind not in KINDS:
        raise ValueError(f"unknown model kind {cfg.kind!r} (choose from {', '.join(KINDS)})")
    return KINDS[cfg.kind](cfg)


def make_checkpoint(
    model: CoupletModel,
    vocab: Vocab,
    step: int = 0,
    best_valid: float | None = None,
    half: bool = False,
    **training_state: Any,
) -> dict[str, Any]:
    """The checkpoint dict; ``half`` stores floating weights as fp16 (for shipping)."""
    # Tied weights appear under several keys; convert each tensor once so that torch.save
    # keeps them as one storage (converting per key stored the embedding three times).
    converted: dict[tuple[int, tuple[int, ...], torch.dtype], torch.Tensor] = {}
    state = {}
    for k, v in model.state_dict().items():
        key = (v.data_ptr(), tuple(v.shape), v.dtype)
        if key not in converted:
            converted[key] = (v.half() if half and v.is_floating_point() else v).detach().cpu()
        state[k] = converted[key]
    return {
        "format_version": FORMAT_VERSION,
        "model_config": model.cfg.to_dict(),
        "vocab": vocab.to_bytes(),
        "state_dict": state,
        "step": step,
        "best_valid": best_valid,
        **training_state,
    }


def atomic_save(obj: Any, path: str | os.PathLike[str]) -> Path:
    """``torch.save`` to ``path`` whole or not at all (``data.files.atomic_file``)."""
    with atomic_file(path) as f:
        torch.save(obj, f)
    return Path(path)


def _feed(h: Any, obj: Any) -> None:
    """Add ``obj`` to the hash ``h``: its type, length or shape, and contents, so that no two
    different payloads feed the same bytes."""
    if isinstance(obj, torch.Tensor):
        t = obj.detach().cpu().contiguous()
        h.update(f"T{t.dtype}{tuple(t.shape)};".encode())
        h.update(t.reshape(-1).view(torch.uint8).numpy().data)
    elif isinstance(obj, dict):
        h.update(f"D{len(obj)};".encode())
        for k, v in obj.items():  # pickling keeps a dict's order, so save and load walk alike
            _feed(h, k)
            _feed(h, v)
    elif isinstance(obj, list | tuple):
        h.update(f"{'L' if isinstance(obj, list) else 'U'}{len(obj)};".encode())
        for v in obj:
            _feed(h, v)
    elif isinstance(obj, bytes | bytearray):
        h.update(f"B{len(obj)};".encode())
        h.update(obj)
    elif isinstance(obj, str):
        data = obj.encode("utf-8", "surrogatepass")
        h.update(f"S{len(data)};".encode())
        h.update(data)
    elif isinstance(obj, bool) or obj is None:
        h.update(f"{obj!r};".encode())
    elif isinstance(obj, int):
        h.update(f"I{obj};".encode())
    elif isinstance(obj, float):
        h.update(f"F{obj.hex()};".encode())
    else:  # what else torch.load(weights_only=True) gives back: torch.dtype, torch.device ...
        h.update(f"O{type(obj).__qualname__}:{obj!r};".encode())


def payload_digest(ckpt: dict[str, Any]) -> str:
    """The sha256 (hex) of a checkpoint dict's payload: every key but ``CHECKSUM_KEY``."""
    h = hashlib.sha256()
    _feed(h, {k: v for k, v in ckpt.items() if k != CHECKSUM_KEY})
    return h.hexdigest()


def seal(ckpt: dict[str, Any]) -> dict[str, Any]:
    """``ckpt`` with ``CHECKSUM_KEY`` set to its payload's digest (the last key)."""
    body = {k: v for k, v in ckpt.items() if k != CHECKSUM_KEY}
    return {**body, CHECKSUM_KEY: payload_digest(body)}


def verified(ckpt: dict[str, Any]) -> bool:
    """Whether a checkpoint dict from ``load_checkpoint`` carried a sum (and so was checked)."""
    return CHECKSUM_KEY in ckpt


def save_checkpoint(ckpt: dict[str, Any], path: str | os.PathLike[str]) -> Path:
    """``ckpt`` sealed with its payload's sum, written atomically to ``path``."""
    return atomic_save(seal(ckpt), path)


def save(path: str | os.PathLike[str], model: CoupletModel, vocab: Vocab, **kwargs: Any) -> Path:
    return save_checkpoint(make_checkpoint(model, vocab, **kwargs), path)


def half_checkpoint(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> dict[str, Any]:
    """``src`` (any checkpoint) as an fp16 weight-only checkpoint at ``dst``: its vocabulary,
    step, best validation loss, trainer state and training configuration kept, the optimizer's
    moments and the random state left out (about a sixth of a training checkpoint's size).
    What a lent machine packs (model/training/pack.py) and ``python -m model.bundle --slim``
    writes, small enough to commit; training goes on from it with ``--init-from`` (a warm
    restart: a fresh optimizer, docs/TRAINING.md). Returns its step, best validation loss,
    source file name and parameter count."""
    ckpt = load_checkpoint(src)
    model = model_from_checkpoint(ckpt)
    meta = {"step": ckpt.get("step", 0), "best_valid": ckpt.get("best_valid")}
    kept = {k: ckpt[k] for k in ("trainer", "train_config") if k in ckpt}
    save_checkpoint(make_checkpoint(model, Vocab(ckpt["vocab"]), half=True, **meta, **kept), dst)
    return {**meta, "source": Path(src).name, "parameters": model.num_parameters()}


def _one_line(e: BaseException) -> str:
    text = " ".join(str(e).split())
    return f"{type(e).__name__}: {text[:200]}{'...' if len(text) > 200 else ''}"


def load_checkpoint(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The checkpoint dict in ``path``, its payload checked against its sum when it has one;
    ``CorruptCheckpoint`` (a ValueError, one line naming the file) when the file is not a
    checkpoint (a text file, a truncated copy) or its payload does not match its sum,
    ValueError for another format, FileNotFoundError when there is none."""
    if Path(path).is_dir():
        raise ValueError(f"{path}: a folder, not a checkpoint file")
    try:
        ckpt = torch.load(path, map_location="cpu", weights_only=True)
    except FileNotFoundError:
        raise
    except Exception as e:  # torch.load raises whatever its unpickler or zip reader meets
        raise CorruptCheckpoint(f"{path}: not a checkpoint ({_one_line(e)})") from e
    version = ckpt.get("format_version") if isinstance(ckpt, dict) else None
    if version != FORMAT_VERSION:
        raise ValueError(f"{path}: unsupported checkpoint format {version!r} (expected {FORMAT_VERSION})")
    if CHECKSUM_KEY in ckpt:
        want, got = ckpt[CHECKSUM_KEY], payload_digest(ckpt)
        if got != want:
            raise CorruptCheckpoint(
                f"{path}: damaged checkpoint: its payload's sha256 is {got[:16]}..., "
                f"not the {str(want)[:16]}... written with it"
            )
    return ckpt


def model_from_checkpoint(ckpt: dict[str, Any], dtype: torch.dtype = torch.float32) -> CoupletModel:
    model = build_model(ModelConfig.from_dict(ckpt["model_config"]))
    state = {k: (v.to(dtype) if v.is_floating_point() else v) for k, v in ckpt["state_dict"].items()}
    model.load_state_dict(state)
    return model.to(dtype)


def load_model(
    path: str | os.PathLike[str], dtype: torch.dtype = torch.float32
) -> tuple[CoupletModel, Vocab, dict[str, Any]]:
    """(model in eval mode, its vocabulary, the rest of the checkpoint without weights or state)."""
    ckpt = load_checkpoint(path)
    model = model_from_checkpoint(ckpt, dtype).eval()
    skip = {"state_dict", "vocab", "optimizer", "scheduler", "rng", CHECKSUM_KEY}
    meta = {k: v for k, v in ckpt.items() if k not in skip}
    return model, Vocab(ckpt["vocab"]), meta


def load_proposer(path: Path, vocab: Vocab, dtype: torch.dtype = torch.float32) -> CoupletTagger:
    """The tagger in checkpoint ``path``; ValueError unless it is one, on ``vocab``."""
    return load_proposer_and_meta(path, vocab, dtype)[0]


def load_proposer_and_meta(
    path: Path, vocab: Vocab, dtype: torch.dtype = torch.float32
) -> tuple[CoupletTagger, dict[str, Any]]:
    """``load_proposer``, and its checkpoint's ``step`` and ``best_valid``, from one read."""
    ckpt = load_checkpoint(path)
    check_proposer(ckpt, vocab, path)
    meta = {"step": ckpt.get("step", 0), "best_valid": ckpt.get("best_valid")}
    return cast(CoupletTagger, model_from_checkpoint(ckpt, dtype).eval()), meta


def check_proposer(ckpt: dict[str, Any], vocab: Vocab, path: Path) -> None:
    """ValueError unless the checkpoint dict ``ckpt`` (from ``path``) holds an encoder-only
    tagger on the vocabulary ``vocab`` (``Vocab.same_as``): checked before any weights are
    built, so `python -m serve` can check a bundle's proposer before start-up."""
    kind = ckpt["model_config"].get("kind", "seq2seq")
    if kind != "tagger":
        raise ValueError(f"{path}: a proposer must be an encoder-only tagger, not a {kind} model")
    if not Vocab(ckpt["vocab"]).same_as(vocab):
        raise ValueError(f"{path}: the proposer's vocabulary differs from the model's")
