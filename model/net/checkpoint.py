"""Checkpoints: a plain dict carrying everything needed to rebuild the model, written atomically.

Keys: ``format_version``, ``model_config`` (dict), ``vocab`` (sentencepiece bytes),
``state_dict``, ``step``, ``best_valid``, and optional training state (``optimizer``,
``scheduler``, ``rng``, ``trainer``...). No pickled classes: ``torch.load`` runs with
``weights_only=True``.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any, cast

import torch

from data.vocab import Vocab
from model.net.tagger import CoupletTagger
from model.net.transformer import CoupletTransformer, ModelConfig

FORMAT_VERSION = 1

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
    """``torch.save`` to a temporary file in the same folder, fsync, then rename over ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            torch.save(obj, f)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)  # mkstemp makes it 0600: a server running as another user must read it
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def save(path: str | os.PathLike[str], model: CoupletModel, vocab: Vocab, **kwargs: Any) -> Path:
    return atomic_save(make_checkpoint(model, vocab, **kwargs), path)


def load_checkpoint(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The checkpoint dict in ``path``; ValueError when the file is not one (a text file, a
    truncated copy), FileNotFoundError when there is none."""
    if Path(path).is_dir():
        raise ValueError(f"{path}: a folder, not a checkpoint file")
    try:
        ckpt = torch.load(path, map_location="cpu", weights_only=True)
    except FileNotFoundError:
        raise
    except Exception as e:  # torch.load raises whatever its unpickler or zip reader meets
        raise ValueError(f"{path}: not a checkpoint ({type(e).__name__}: {e})") from e
    version = ckpt.get("format_version") if isinstance(ckpt, dict) else None
    if version != FORMAT_VERSION:
        raise ValueError(f"{path}: unsupported checkpoint format {version!r} (expected {FORMAT_VERSION})")
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
    skip = {"state_dict", "vocab", "optimizer", "scheduler", "rng"}
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
    check_proposer(ckpt, vocab.to_bytes(), path)
    meta = {"step": ckpt.get("step", 0), "best_valid": ckpt.get("best_valid")}
    return cast(CoupletTagger, model_from_checkpoint(ckpt, dtype).eval()), meta


def check_proposer(ckpt: dict[str, Any], vocab: bytes, path: Path) -> None:
    """ValueError unless the checkpoint dict ``ckpt`` (from ``path``) holds an encoder-only
    tagger on the vocabulary ``vocab`` (``Vocab.to_bytes()``): checked before any weights are
    built, so `python -m serve` can check a bundle's proposer before start-up."""
    kind = ckpt["model_config"].get("kind", "seq2seq")
    if kind != "tagger":
        raise ValueError(f"{path}: a proposer must be an encoder-only tagger, not a {kind} model")
    if ckpt["vocab"] != vocab:
        raise ValueError(f"{path}: the proposer's vocabulary differs from the model's")
