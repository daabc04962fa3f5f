"""`make serve` / `python -m serve`: the couplet site on http://127.0.0.1:8000."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import get_args

from pydantic import ValidationError
from sqlalchemy.exc import SQLAlchemyError

from model.store.bundle import check_models
from model.store.fingerprint import FingerprintIndex, KnownLowers
from model.store.layout import FINGERPRINTS_FILE, has_model, known_file, missing_model, verify_bundle
from serve.db import make_engine
from serve.logs import LogLevel
from serve.settings import Settings, settings_problems

LOG_LEVELS = get_args(LogLevel)


def port(text: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= 65535:
        raise argparse.ArgumentTypeError(f"a port is a number from 1 to 65535, not {text!r}")
    return int(text)


def preflight(settings: Settings) -> str:
    """What would stop the server's start-up, said in one line ("" for nothing): a bundle file
    that differs from the bundle's SHA256SUMS, a model file or proposer that is not a checkpoint
    (or a proposer that does not fit the model), a feedback store that cannot be reached."""
    try:
        verify_bundle(settings.model_dir)
        check_models(settings.model_dir)  # the model and the fast mode's tagger, read as load_bundle will
        known_path = known_file(settings.model_dir)
        if known_path is not None:  # the known lower lines, one record per fingerprint
            KnownLowers.load(FingerprintIndex.load(settings.model_dir / FINGERPRINTS_FILE), known_path)
    except (OSError, ValueError) as e:
        return f"cannot load the model bundle: {e}"
    try:
        engine = make_engine(settings.database_url)
        with engine.connect():
            pass
        engine.dispose()
    except (ValueError, ImportError, SQLAlchemyError) as e:  # ImportError: no driver for the URL
        return f"cannot open the feedback store: {type(e).__name__}: {str(e).splitlines()[0]}"
    return ""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m serve", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=port, default=8000, help="1-65535 (default 8000)")
    parser.add_argument("--model", type=Path, help="model bundle folder (default models/default)")
    parser.add_argument(
        "--database-url",
        help="SQLAlchemy URL of the feedback store: sqlite:///PATH (default work/feedback.db) or "
        "postgresql://user:password@host:port/database",
    )
    parser.add_argument(
        "--log-level",
        choices=LOG_LEVELS,
        help="default info (DUILIAN_SERVE_LOG_LEVEL); JSON lines: DUILIAN_SERVE_LOG_JSON=true",
    )
    args = parser.parse_args(argv)
    overrides = {"model_dir": args.model, "database_url": args.database_url, "log_level": args.log_level}
    try:
        settings = Settings(**{k: v for k, v in overrides.items() if v is not None})
    except ValidationError as e:
        print(settings_problems(e), file=sys.stderr)
        return 2
    if not has_model(settings.model_dir):
        print(
            f"{missing_model(settings.model_dir)}.\n"
            "The shipped model lives in models/default/. To make one: `make train TRAIN_ARGS=--ship`\n"
            "(`make train PRESET=tiny TRAIN_ARGS=--ship` for a quick, weak one), which installs its bundle\n"
            "there; or serve another bundle with `make serve SERVE_ARGS='--model work/train/cpu/bundle'`\n"
            "(python -m serve --model DIR, or DUILIAN_SERVE_MODEL_DIR=DIR).",
            file=sys.stderr,
        )
        return 2

    problem = preflight(settings)
    if problem:
        print(problem, file=sys.stderr)
        return 2

    # the site's modules (about 2 s) after the checks: a bad folder is said at once
    from serve.main import run

    run(settings, args.host, args.port)
    return 0


if __name__ == "__main__":
    sys.exit(main())
