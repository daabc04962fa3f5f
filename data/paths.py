"""Every path the project uses, in one place, each overridable by an environment variable."""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def corpus_dir() -> Path:
    """The shared corpora (``DUILIAN_CORPUS_DIR``, default ``../shared/data`` beside the repo)."""
    return Path(os.environ.get("DUILIAN_CORPUS_DIR", ROOT.parent / "shared" / "data"))


def work_dir() -> Path:
    """Everything generated (``DUILIAN_WORK_DIR``, default ``work/``, ignored by git)."""
    return Path(os.environ.get("DUILIAN_WORK_DIR", ROOT / "work"))


def data_dir() -> Path:
    """The data stage's outputs: splits, vocabulary, report."""
    return Path(os.environ.get("DUILIAN_DATA_DIR", work_dir() / "data"))


def default_model_dir() -> Path:
    """The shipped default model bundle that ``make serve`` loads."""
    return Path(os.environ.get("DUILIAN_MODEL_DIR", ROOT / "models" / "default"))


def graph_cache_dir() -> Path:
    """The exported ONNX graphs kept between runs (``model.decoding.onnx_engine.GraphCache``),
    shared by the command line, the server's decode workers, evaluation and the benchmarks
    (``DUILIAN_GRAPH_CACHE``, default ``work/cache/onnx``). Exporting a model's graphs costs
    about 40 s on two cores; reading them, well under a second."""
    return Path(os.environ.get("DUILIAN_GRAPH_CACHE", work_dir() / "cache" / "onnx"))


def cache_dir() -> Path:
    """Tables derived from the libraries' own data, written once and read at every start
    (``DUILIAN_CACHE_DIR``, default ``work/cache``): jieba's dictionary by first character
    (data/segment.py) and pypinyin's readings and tone-changing phrases (data/tones.py)."""
    return Path(os.environ.get("DUILIAN_CACHE_DIR", work_dir() / "cache"))
