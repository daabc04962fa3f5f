"""What a ``duilian`` command loads (the bundle, with the site's default engine) and how it
fails (``Problem``: a bilingual message and an exit status), shared by its verbs."""

from __future__ import annotations

import argparse
from pathlib import Path

from data.paths import default_model_dir, graph_cache_dir
from duilian.engine import Engine, set_decode_threads
from duilian.service import LoadedModel
from model.decoding.options import SERVE_INT8, SERVE_RUNTIME
from model.store.layout import WEIGHTS_FILE, has_model, missing_model

EXIT_INPUT = 2  # a refused line, option or model folder
EXIT_FAILED = 1  # an unexpected error (its message, never a trace)


class Problem(Exception):
    """Something to say on stderr, in Chinese and English, and the exit status to leave with."""

    def __init__(self, zh: str, en: str, status: int = EXIT_INPUT) -> None:
        super().__init__(f"{zh} / {en}")
        self.status = status


def load(args: argparse.Namespace) -> LoadedModel:
    """The bundle with the site's default engine (the server's settings' defaults). On ONNX
    Runtime with its graphs cached (after the first run) PyTorch is not imported at all."""
    folder: Path = args.model or default_model_dir()
    if not has_model(folder):
        raise Problem(
            f"{folder} 不是模型目录（缺少 {WEIGHTS_FILE}，或为旧格式）",
            f"{missing_model(folder)}; the shipped one is models/default",
        )
    cache = args.graph_cache or graph_cache_dir()
    try:
        model = LoadedModel.load(
            folder, None, Engine(SERVE_INT8, SERVE_RUNTIME, cache), warm=False, lazy=True
        )
    except (OSError, ValueError, KeyError, RuntimeError) as exc:
        raise Problem("模型无法读取", f"the model bundle at {folder} cannot be read: {exc}") from exc
    set_decode_threads(1)  # as the site's decode workers: one thread a decode
    return model
