"""The feedback store itself, on a real SQLite file and a real PostgreSQL server: servers that
start together on one store, the URLs people type, and bad URLs."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from pydantic import ValidationError
from sqlalchemy.engine import Engine

from serve import db
from serve.__main__ import main as serve_main
from serve.db import Base, Feedback, FeedbackStore, init_db, make_engine
from serve.export_feedback import main as export_main
from serve.settings import Settings
from tests.serve.postgres import LocalPostgres


def start_together(engines: list[Engine]) -> list[Exception]:
    """Each thread is a server starting up on one store and storing a line; what they raised."""
    start, errors = threading.Barrier(len(engines)), []

    def server(i: int) -> None:
        start.wait()
        try:
            FeedbackStore(engines[i]).add(Feedback(kind="own", upper="春风", lower=f"秋{i}"))
        except Exception as e:  # collected: an exception in a thread would be lost
            errors.append(e)

    threads = [threading.Thread(target=server, args=(i,)) for i in range(len(engines))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return errors


def test_servers_starting_together_create_the_table_once(store_url: str) -> None:
    """Without a lock around the check and the CREATE, all but one fail "already exists"."""
    engines = [make_engine(store_url) for _ in range(8)]
    try:
        for _ in range(3):  # a race may go well once by chance; three rounds on a fresh schema
            Base.metadata.drop_all(engines[0])
            assert start_together(engines) == []
            with init_db(engines[0])() as session:
                assert sorted(row.lower for row in session.query(Feedback)) == [f"秋{i}" for i in range(8)]
    finally:
        for engine in engines:
            engine.dispose()


@pytest.mark.postgres
def test_a_plain_postgresql_url_uses_psycopg(postgres: LocalPostgres) -> None:
    with postgres.database() as url:
        plain = url.replace("postgresql+psycopg://", "postgresql://")
        engine = make_engine(plain)
        try:
            assert engine.dialect.driver == "psycopg"
            assert FeedbackStore(engine).add(Feedback(kind="own", upper="春风", lower="秋雨")) == 1
        finally:
            engine.dispose()
    assert db.store_url("postgres://u:secret@db.example:5432/duilian").drivername == "postgresql+psycopg"


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("work/feedback.db", "not an SQLAlchemy URL"),
        ("", "not an SQLAlchemy URL"),
        ("oracel://u:secret@host/db", "unknown database 'oracel'"),
    ],
)
def test_a_bad_database_url_is_refused_clearly(
    url: str, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(ValidationError, match=message):
        Settings(database_url=url)
    assert serve_main(["--database-url", url]) == 2
    err = capsys.readouterr().err
    assert "database_url: Value error, the feedback database URL" in err and message in err
    assert "secret" not in err
    with pytest.raises(SystemExit) as exit_:
        export_main(["--database-url", url, "--out", str(tmp_path / "out.tsv")])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert message in err and "secret" not in err
    assert not (tmp_path / "out.tsv").exists()
