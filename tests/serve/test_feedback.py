"""Feedback: stored in a real SQLite file (WAL) and in a real PostgreSQL server, hundreds of
concurrent posts all kept, the export. Every test here runs once on each store."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import create_engine, text

from serve.export_feedback import main as export_main
from serve.settings import Settings
from tests.serve.conftest import LiveServer


@pytest.fixture
def database_url(store_url: str) -> str:
    return store_url


def rows(settings: Settings) -> list[tuple]:
    """What the store holds, read back through a connection of its own."""
    engine = create_engine(settings.database_url)
    try:
        with engine.connect() as con:
            query = text("SELECT id, kind, upper, lower, vote, model_version FROM feedback ORDER BY id")
            return [tuple(row) for row in con.execute(query)]
    finally:
        engine.dispose()


def test_vote_and_own_line_are_stored(client: TestClient, settings: Settings) -> None:
    r = client.post(
        "/api/v1/feedback",
        json={"kind": "vote", "upper": "春风得意", "lower": "秋月生辉", "vote": 1, "model_version": "test-a"},
    )
    assert r.status_code == 201, r.text
    vote_id = r.json()["id"]
    r = client.post("/api/v1/feedback", json={"kind": "own", "upper": "春风得意", "lower": "春风得意"})
    assert r.status_code == 201
    own = r.json()
    assert own["report"]["no_reuse"] is False and own["report"]["hard_ok"] is False
    assert rows(settings) == [
        (vote_id, "vote", "春风得意", "秋月生辉", 1, "test-a"),
        (own["id"], "own", "春风得意", "春风得意", None, None),
    ]
    if settings.database_url.startswith("sqlite"):
        with sqlite3.connect(settings.database_url.removeprefix("sqlite:///")) as con:
            assert con.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_bad_feedback_is_refused(client: TestClient, settings: Settings) -> None:
    for body in (
        {"kind": "vote", "upper": "春风得意", "lower": "秋月生辉"},  # no vote
        {"kind": "vote", "upper": "春风得意", "lower": "秋月生辉", "vote": 5},
        {"kind": "own", "upper": "春风得意", "lower": "<img src=x onerror=alert(1)>"},
        {"kind": "like", "upper": "春风得意", "lower": "秋月生辉"},
        {"kind": "vote", "upper": "春风得意", "lower": "秋月生辉", "vote": True},  # votes are integers
        {"kind": "vote", "upper": "春风得意", "lower": "秋月生辉", "vote": 1.0},
        {"kind": "vote", "upper": "春风得意", "lower": "秋月生辉", "vote": 1, "score": 3},  # an unknown field
    ):
        r = client.post("/api/v1/feedback", json=body)
        assert r.status_code == 422, body
    assert rows(settings) == []


async def post_many(url: str, n: int) -> list[httpx.Response]:
    # idle connections dropped after 1 s, well inside uvicorn's 5 s keep-alive (httpx's default
    # expiry is 5 s too, so a post can go out on a connection the server is just closing: the
    # likeliest cause, not proven, of a ReadError seen twice in about a dozen loaded runs)
    limits = httpx.Limits(max_connections=64, keepalive_expiry=1.0)
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=60) as http:
        return await asyncio.gather(
            *(
                http.post(
                    "/api/v1/feedback",
                    json={
                        "kind": "vote",
                        "upper": "春风得意",
                        "lower": "秋月生辉",
                        "vote": 1 if i % 3 else -1,
                        "model_version": f"load-{i}",
                    },
                )
                for i in range(n)
            )
        )


@pytest.mark.slow
def test_hundreds_of_concurrent_posts_are_all_stored(live: LiveServer, settings: Settings) -> None:
    n = 300
    responses = asyncio.run(post_many(live.url, n))
    assert [r.status_code for r in responses] == [201] * n
    ids = {r.json()["id"] for r in responses}
    assert len(ids) == n
    stored = rows(settings)
    assert {row[0] for row in stored} == ids
    assert sorted(row[5] for row in stored) == sorted(f"load-{i}" for i in range(n))


def test_export_writes_accepted_pairs(client: TestClient, settings: Settings, tmp_path: Path) -> None:
    posts = [
        {"kind": "vote", "upper": "春风得意", "lower": "秋月生辉", "vote": 1},
        {"kind": "vote", "upper": "春风得意", "lower": "秋月生辉", "vote": 1},
        {"kind": "vote", "upper": "春风得意", "lower": "夏雨生凉", "vote": 1},
        {"kind": "vote", "upper": "春风得意", "lower": "夏雨生凉", "vote": -1},  # net 0: not accepted
        {"kind": "vote", "upper": "山高水长", "lower": "海阔天空", "vote": -1},
        {"kind": "vote", "upper": "山高水长", "lower": "短", "vote": 1},  # wrong length: not accepted
        {"kind": "vote", "upper": "山高水长", "lower": "山高水远", "vote": 1},  # reuses 山高水: not accepted
        {"kind": "own", "upper": "花开富贵", "lower": "竹报平安"},  # keeps every hard rule
        {"kind": "own", "upper": "花开富贵", "lower": "花开平安"},  # reuses 花开: refused
        {"kind": "own", "upper": "花开富贵", "lower": "竹报平"},  # wrong length: refused
    ]
    for body in posts:
        assert client.post("/api/v1/feedback", json=body).status_code == 201
    out = tmp_path / "feedback" / "accepted.tsv"
    assert export_main(["--database-url", settings.database_url, "--out", str(out)]) == 0
    assert out.read_text(encoding="utf-8") == "春风得意\t秋月生辉\n花开富贵\t竹报平安\n"


def test_export_refuses_a_store_that_is_not_there_and_keeps_the_last_export(tmp_path: Path, capsys) -> None:
    out = tmp_path / "accepted.tsv"
    out.write_text("春风得意\t秋月生辉\n", encoding="utf-8")
    typo = tmp_path / "feedbak.db"
    with pytest.raises(SystemExit) as exit_:
        export_main(["--database-url", f"sqlite:///{typo}", "--out", str(out)])
    assert exit_.value.code == 2 and "no feedback database" in capsys.readouterr().err
    assert not typo.exists()  # not created empty
    (tmp_path / "notdb.db").write_text("not a database\n")
    with pytest.raises(SystemExit) as exit_:
        export_main(["--database-url", f"sqlite:///{tmp_path / 'notdb.db'}", "--out", str(out)])
    assert exit_.value.code == 2 and "cannot read the feedback store" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_:
        export_main(["--database-url", f"sqlite:///{tmp_path / 'notdb.db'}", "--out", str(tmp_path)])
    assert exit_.value.code == 2 and "is a folder" in capsys.readouterr().err
    assert out.read_text(encoding="utf-8") == "春风得意\t秋月生辉\n"  # the last export is kept
    assert sorted(p.name for p in tmp_path.iterdir()) == ["accepted.tsv", "notdb.db"]  # no stray files
