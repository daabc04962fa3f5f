"""The feedback store: SQLAlchemy, an SQLite file in WAL mode by default, any SQLAlchemy URL works."""

from __future__ import annotations

import datetime as dt
import threading
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any

from sqlalchemy import DateTime, Integer, String, create_engine, event
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, sessionmaker


class Base(DeclarativeBase):
    pass


class Feedback(Base):
    """One vote on a candidate (kind ``vote``, vote ±1) or a person's own lower line (kind ``own``)."""

    __tablename__ = "feedback"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    created_at: Mapped[dt.datetime] = mapped_column(
        DateTime(timezone=True), default=lambda: dt.datetime.now(dt.UTC)
    )
    kind: Mapped[str] = mapped_column(String(8), index=True)
    upper: Mapped[str] = mapped_column(String(64))
    lower: Mapped[str] = mapped_column(String(64))
    vote: Mapped[int | None] = mapped_column(Integer, nullable=True)
    model_version: Mapped[str | None] = mapped_column(String(64), nullable=True)


def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
    # WAL lets readers run beside the one writer; busy_timeout makes concurrent writers wait
    # for the lock instead of failing with "database is locked".
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA busy_timeout=30000")
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.close()


def make_engine(url: str) -> Engine:
    """Engine for ``url``; for an SQLite file, its folder is created and WAL switched on."""
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite":
        return create_engine(url, pool_pre_ping=True)
    if parsed.database and parsed.database != ":memory:":
        Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
    engine = create_engine(url, pool_size=8, max_overflow=32, pool_timeout=60)
    event.listen(engine, "connect", _sqlite_pragmas)
    return engine


def init_db(engine: Engine) -> sessionmaker:
    Base.metadata.create_all(engine)
    return sessionmaker(engine, expire_on_commit=False)


class FeedbackStore:
    """Adds feedback rows. SQLite has one writer at a time: writers of this process queue on a
    lock instead of on SQLite's busy timeout, whose back-off sleeps make a burst of posts slow."""

    def __init__(self, engine: Engine) -> None:
        self.sessions = init_db(engine)
        self._write_lock: AbstractContextManager[object] = (
            threading.Lock() if engine.dialect.name == "sqlite" else nullcontext()
        )

    def add(self, row: Feedback) -> int:
        with self._write_lock, self.sessions() as session:
            session.add(row)
            session.commit()
            return row.id
