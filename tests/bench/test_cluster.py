"""The cluster benchmark's pieces (bench/cluster.py) that decide its verdicts: how feedback
rows are counted against the keys the clients were answered for (lost, doubled), on a real
PostgreSQL, and its HTTP client (from a chosen loopback address, headers read back) against a
real socket. The whole benchmark takes minutes, so it is not run here."""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Iterator

import pytest

from bench.cluster import request, stored
from serve.cluster.postgres import LocalPostgres, postgres_bindir
from serve.db import Feedback, FeedbackStore, make_engine


@pytest.fixture
def store_url() -> Iterator[str]:
    if postgres_bindir() is None:
        pytest.skip("PostgreSQL missing: no initdb/postgres (bash scripts/sysdeps.sh installs it)")
    with LocalPostgres() as server, server.database() as url:
        yield url


def row() -> Feedback:
    return Feedback(kind="own", upper="春风得意", lower="秋月生辉", vote=None, model_version="bench")


@pytest.mark.postgres
def test_rows_are_counted_against_the_answered_keys(store_url: str) -> None:
    engine = make_engine(store_url)
    store = FeedbackStore(engine)
    for key in ("a", "b", "c"):
        store.add_once(row(), key, "fingerprint")
    store.add_once(row(), "a", "fingerprint")  # a retry with its key: no new row
    assert stored(store_url, {"a", "b", "c"}) == {
        "feedback_acked": 3, "feedback_rows": 3, "feedback_lost": 0, "feedback_doubled": 0,
    }  # fmt: skip
    store.add(row())  # a row stored without its key: what a retry without a key would leave
    figures = stored(store_url, {"a", "b", "c", "d"})  # and "d" answered but never stored
    assert figures["feedback_doubled"] == 1 and figures["feedback_lost"] == 1
    engine.dispose()


def test_the_client_speaks_from_its_address_and_reads_the_answer() -> None:
    seen: list[tuple[str, bytes]] = []
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]

        def answer() -> None:
            conn, (peer, _) = listener.accept()
            with conn:
                data = b""
                while b'"n": 5}' not in data:
                    data += conn.recv(4096)
                seen.append((peer, data))
                body = b'{"ok": true}'
                conn.sendall(
                    b"HTTP/1.1 429 Too Many Requests\r\nX-Served-By: r2\r\nContent-Length: "
                    + str(len(body)).encode() + b"\r\n\r\n" + body
                )  # fmt: skip

        server = threading.Thread(target=answer)
        server.start()
        status, headers, payload = asyncio.run(
            request(port, "POST", "/api/v1/generate", {"upper": "春风得意", "n": 5}, "127.0.0.7", {"K": "v"})
        )
        server.join(timeout=10)
    assert (status, headers["x-served-by"], payload) == (429, "r2", b'{"ok": true}')
    assert seen[0][0] == "127.0.0.7" and b"\r\nK: v\r\n" in seen[0][1]
    assert asyncio.run(request(port, "GET", "/", None, "127.0.0.7", {})) == (0, {}, b"")  # closed: none
