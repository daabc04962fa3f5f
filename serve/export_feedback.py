"""`python -m serve.export_feedback`: accepted feedback as training pairs for the data stage.

Accepted: candidates whose votes sum above zero, and people's own lower lines, in both
cases only pairs that keep every hard rule (data.rules.check): a vote sent by hand for a
pair the service could never have proposed does not reach the training data. Written to
work/feedback/accepted.tsv (upper<TAB>lower, no header), the data stage's "feedback" source.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pydantic import ValidationError
from sqlalchemy import func, select
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from data.files import atomic_file
from data.paths import work_dir
from data.rules import check
from serve.db import Feedback, init_db, make_engine
from serve.settings import Settings, settings_problems


def default_output() -> Path:
    return work_dir() / "feedback" / "accepted.tsv"


def accepted_pairs(session: Session) -> list[tuple[str, str]]:
    """Up-voted candidates and own lines that keep the hard rules, deduplicated, in first-seen order."""
    voted = session.execute(
        select(Feedback.upper, Feedback.lower)
        .where(Feedback.kind == "vote")
        .group_by(Feedback.upper, Feedback.lower)
        .having(func.sum(Feedback.vote) > 0)
        .order_by(func.min(Feedback.id))
    ).all()
    own = session.execute(
        select(Feedback.upper, Feedback.lower).where(Feedback.kind == "own").order_by(Feedback.id)
    )
    pairs = [(u, w) for u, w in [*voted, *own] if check(u, w).hard_ok]
    return list(dict.fromkeys(pairs))


def write_tsv(pairs: list[tuple[str, str]], out: Path) -> None:
    """Write whole or not at all (``data.files.atomic_file``)."""
    with atomic_file(out, "w", encoding="utf-8") as f:
        f.writelines(f"{u}\t{w}\n" for u, w in pairs)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m serve.export_feedback", description=__doc__)
    parser.add_argument(
        "--database-url", help="sqlite:///PATH or postgresql://...; default: the service's setting"
    )
    parser.add_argument("--out", type=Path, default=None, help="default work/feedback/accepted.tsv")
    args = parser.parse_args(argv)
    out = args.out or default_output()
    if out.is_dir():
        parser.error(f"--out {out} is a folder; name the file to write")
    try:
        url = Settings().database_url if args.database_url is None else args.database_url
        # Not created when missing: the export would overwrite ``out`` with nothing, and a typo
        # in the path must not cost the accepted pairs written before.
        engine = make_engine(url, create=False)
    except ValidationError as e:
        parser.error(settings_problems(e))
    except (ValueError, ImportError) as e:  # ImportError: no driver for the URL's database
        parser.error(str(e))
    try:
        with init_db(engine)() as session:
            pairs = accepted_pairs(session)
    except SQLAlchemyError as e:  # the server is down, the file is not a database, ...
        parser.error(f"cannot read the feedback store: {type(e).__name__}: {str(e).splitlines()[0]}")
    finally:
        engine.dispose()
    write_tsv(pairs, out)
    print(f"{len(pairs)} accepted pairs written to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
