"""Whether the data stage's outputs are fresh: every output there, and ``report.json``
carrying the stamp of the current configuration, inputs and code.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from data.config import DataConfig
from data.inputs import resolve
from data.normalize import VARIANTS

OUTPUTS = (
    "train.tsv",
    "valid.tsv",
    "valid_classical.tsv",
    "valid_formal.tsv",
    "test_formal.tsv",
    "test.tsv",
    "test_leakfree.tsv",
    "test_leak.txt",
    "spm.model",
    "spm.vocab",
    "report.json",
    "DATA_CARD.md",
)


def stamp(config: DataConfig) -> str:
    """Hash of the configuration, every input file's size and mtime, and this stage's code."""
    h = hashlib.sha256(json.dumps(config.as_dict(), sort_keys=True).encode())
    inputs = [p for s in config.sources for p in resolve(config, s)[1]]
    # A release folder's files (its path is a folder, whose mtime misses an edited file).
    inputs = [f for p in inputs for f in (sorted(p.rglob("*.txt")) if p.is_dir() else [p])]
    inputs += [config.corpus_dir / name for name in (config.formal_file, *config.formal_others) if name]
    inputs += [config.corpus_dir / config.badwords, config.allow_list, VARIANTS]
    inputs += [config.vocab_from] if config.vocab_from is not None else []
    inputs += sorted(Path(__file__).parent.glob("*.py"))
    for path in inputs:
        if path.exists():
            st = path.stat()
            h.update(f"{path}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return h.hexdigest()


def is_fresh(config: DataConfig) -> bool:
    """True when every output exists and report.json carries the current stamp."""
    out = config.out_dir
    if not all((out / name).exists() for name in OUTPUTS):
        return False
    try:
        return json.loads((out / "report.json").read_text(encoding="utf-8")).get("stamp") == stamp(config)
    except (OSError, ValueError):
        return False
