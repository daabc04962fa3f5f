"""`make serve` / `python -m serve`: the couplet site on http://127.0.0.1:8000."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from pydantic import ValidationError

from model.bundle import MODEL_FILE
from serve.settings import Settings, settings_problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m serve", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--model", type=Path, help="model bundle folder (default models/default)")
    parser.add_argument(
        "--database-url",
        help="SQLAlchemy URL of the feedback store: sqlite:///PATH (default work/feedback.db) or "
        "postgresql://user:password@host:port/database",
    )
    parser.add_argument("--log-level", default="info")
    args = parser.parse_args(argv)
    overrides = {"model_dir": args.model, "database_url": args.database_url}
    try:
        settings = Settings(**{k: v for k, v in overrides.items() if v is not None})
    except ValidationError as e:
        print(settings_problems(e), file=sys.stderr)
        return 2
    if not (settings.model_dir / MODEL_FILE).is_file():
        print(
            f"no model bundle at {settings.model_dir} (missing {MODEL_FILE}).\n"
            "The shipped model lives in models/default/. To make one: `make train TRAIN_ARGS=--ship`\n"
            "(`make train PRESET=tiny TRAIN_ARGS=--ship` for a quick, weak one), which installs its bundle\n"
            "there; or serve another bundle with `make serve SERVE_ARGS='--model work/train/cpu/bundle'`\n"
            "(python -m serve --model DIR, or DUILIAN_SERVE_MODEL_DIR=DIR).",
            file=sys.stderr,
        )
        return 2

    import uvicorn  # after the check, so a missing model is reported fast

    from serve.main import create_app

    logging.basicConfig(
        level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    uvicorn.run(create_app(settings), host=args.host, port=args.port, log_level=args.log_level)
    return 0


if __name__ == "__main__":
    sys.exit(main())
