"""Training presets: ``model/training/presets/<name>.json`` (a ``model`` and a ``train``
section, and the validation sizes), with ``--set key=value`` overrides."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from model.net.transformer import ModelConfig
from model.training.config import TrainConfig
from model.training.errors import UsageError

PRESETS = Path(__file__).parent / "presets"


def load_preset(name: str, overrides: list[str]) -> dict[str, Any]:
    path = PRESETS / f"{name}.json"
    if not path.is_file():
        names = ", ".join(sorted(p.stem for p in PRESETS.glob("*.json")))
        raise UsageError(f"unknown preset {name!r} (choose from {names})")
    preset = json.loads(path.read_text(encoding="utf-8"))
    for item in overrides:
        _apply_override(preset, item)
    return preset


def _apply_override(preset: dict[str, Any], item: str) -> None:
    """``key=value`` sets a training option; ``model.key=value`` a model option; JSON values."""
    key, sep, raw = item.partition("=")
    if not sep:
        raise UsageError(f"--set expects key=value, got {item!r}")
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        value = raw
    section, _, name = key.rpartition(".")
    if section == "model" and name in ModelConfig.__dataclass_fields__:
        preset["model"][name] = value
    elif not section and name in TrainConfig.__dataclass_fields__:
        preset["train"][name] = value
    elif not section and name in ("valid_pairs", "bleu_pairs", "eval_limit", "proposer"):
        preset[name] = value
    else:
        raise UsageError(f"--set: unknown option {key!r}")
