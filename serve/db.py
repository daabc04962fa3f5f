"""The feedback store through SQLAlchemy: an SQLite file in WAL mode by default, a PostgreSQL
server (``postgresql://user:password@host/db``, psycopg 3) when several servers share one store."""

from __future__ import annotations

import datetime as dt
import threading
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any

from sqlalchemy import DateTime, Integer, String, create_engine, event, func, select
from sqlalchemy.engine import URL, Engine, make_url
from sqlalchemy.exc import ArgumentError, IntegrityError, NoSuchModuleError
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


class FeedbackKey(Base):
    """An ``Idempotency-Key`` a feedback post came with, and the row that post stored: a retry
    with the key (its answer was lost) gets that row again instead of a second one. Its own
    table, so a store made before it gains it on the next start (create_all adds tables)."""

    __tablename__ = "feedback_key"

    key: Mapped[str] = mapped_column(String(128), primary_key=True)
    feedback_id: Mapped[int] = mapped_column(Integer)
    fingerprint: Mapped[str] = mapped_column(String(64))  # of the request body, to refuse a reused key
    created_at: Mapped[dt.datetime] = mapped_column(
        DateTime(timezone=True), default=lambda: dt.datetime.now(dt.UTC)
    )


class KeyReused(ValueError):
    """An Idempotency-Key sent again with a different body."""


def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
    # WAL lets readers run beside the one writer; busy_timeout makes concurrent writers wait
    # for the lock instead of failing with "database is locked".
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA busy_timeout=30000")
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.close()


def store_url(url: str) -> URL:
    """``url`` parsed and checked. Plain ``postgresql://`` (or ``postgres://``) URLs get the
    psycopg (v3) driver this project installs, not SQLAlchemy's default psycopg2.
    ValueError says what is wrong, without echoing the URL (it may hold a password)."""
    try:
        parsed = make_url(url)
    except ArgumentError:
        raise ValueError(
            "the feedback database URL is not an SQLAlchemy URL; examples: "
            "sqlite:///work/feedback.db, postgresql://user:password@host:5432/duilian"
        ) from None
    if parsed.drivername in ("postgresql", "postgres"):
        parsed = parsed.set(drivername="postgresql+psycopg")
    try:
        parsed.get_dialect()
    except NoSuchModuleError:
        raise ValueError(
            f"the feedback database URL names an unknown database {parsed.drivername!r}; "
            "use sqlite:///PATH or postgresql://user:password@host:port/database"
        ) from None
    return parsed


def make_engine(url: str, create: bool = True) -> Engine:
    """Engine for ``url``; for an SQLite file, its folder is created and WAL switched on.
    ``create=False``: an SQLite file that does not exist is a ValueError (a reader of the
    store, given a mistyped path, would otherwise open a new empty one)."""
    parsed = store_url(url)
    if parsed.get_backend_name() != "sqlite":
        # A server's sync endpoints run on up to 40 threads; 16 connections serve them (an
        # insert is short), so several servers stay well under PostgreSQL's 100 connections.
        return create_engine(parsed, pool_size=8, max_overflow=8, pool_timeout=60, pool_pre_ping=True)
    if parsed.database and parsed.database != ":memory:":
        if not create and not Path(parsed.database).is_file():
            raise ValueError(f"no feedback database at {parsed.database}")
        Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
    engine = create_engine(parsed, pool_size=8, max_overflow=32, pool_timeout=60)
    event.listen(engine, "connect", _sqlite_pragmas)
    return engine


SCHEMA_LOCK = 0x6475696C69616E  # "duilian": PostgreSQL advisory lock held while creating the table


def init_db(engine: Engine) -> sessionmaker:
    """Creates the table where missing and returns the session factory. Several servers may
    start at once on one store: the check and the CREATE run under a lock of the database's
    own, or all but the first would fail with "already exists"."""
    with engine.begin() as conn:
        if conn.dialect.name == "postgresql":
            conn.execute(select(func.pg_advisory_xact_lock(SCHEMA_LOCK)))
        elif conn.dialect.name == "sqlite":
            conn.exec_driver_sql("BEGIN IMMEDIATE")  # the write lock, before the check
        Base.metadata.create_all(conn)
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

    def add_once(self, row: Feedback, key: str, fingerprint: str) -> tuple[int, bool]:
        """``row`` stored with ``key`` in one transaction, unless ``key`` was stored before: then
        that row's id. Returns (id, replayed); KeyReused when the key came with another body."""
        with self._write_lock, self.sessions() as session:
            found = session.get(FeedbackKey, key)
            if found is None:
                session.add(row)
                session.flush()
                session.add(FeedbackKey(key=key, feedback_id=row.id, fingerprint=fingerprint))
                try:
                    session.commit()
                    return row.id, False
                except IntegrityError:  # another server stored the same key first
                    session.rollback()
                    found = session.get(FeedbackKey, key)
                    if found is None:
                        raise
            if found.fingerprint != fingerprint:
                raise KeyReused(key)
            return found.feedback_id, True
