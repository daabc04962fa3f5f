"""`python -m serve.export_feedback`: accepted feedback as training pairs for the data stage.

Accepted: candidates whose votes sum above zero, and people's own lower lines, in both
cases only pairs that keep every hard rule (model.rules.check): a vote sent by hand for a
pair the service could never have proposed does not reach the training data. Written to
work/feedback/accepted.tsv (upper<TAB>lower, no header), the data stage's "feedback" source.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

from pydantic import ValidationError
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from data.paths import work_dir
from model.rules import check
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
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.", dir=out.parent)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.writelines(f"{u}\t{w}\n" for u, w in pairs)
    os.replace(tmp, out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m serve.export_feedback", description=__doc__)
    parser.add_argument(
        "--database-url", help="sqlite:///PATH or postgresql://...; default: the service's setting"
    )
    parser.add_argument("--out", type=Path, default=None, help="default work/feedback/accepted.tsv")
    args = parser.parse_args(argv)
    out = args.out or default_output()
    try:
        url = Settings().database_url if args.database_url is None else args.database_url
        engine = make_engine(url)
    except ValidationError as e:
        parser.error(settings_problems(e))
    except ValueError as e:
        parser.error(str(e))
    with init_db(engine)() as session:
        pairs = accepted_pairs(session)
    engine.dispose()
    write_tsv(pairs, out)
    print(f"{len(pairs)} accepted pairs written to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
