"""A PostgreSQL server on a loopback port: throwaway (a temporary folder, no fsync) for the
feedback store's tests and benchmarks, or kept in a folder (``data_dir``, durable) for the
cluster deployment (``python -m serve.cluster``).

``initdb`` and ``postgres`` refuse to run as root: as root they run as the ``postgres``
user (Debian's package creates it), in a folder handed to that user.
"""

from __future__ import annotations

import glob
import itertools
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg

from crawler.localredis import free_port, stop_process

USER = "duilian"  # the cluster's superuser (trust authentication, loopback only)


def postgres_bindir() -> Path | None:
    """Folder of initdb and postgres: on PATH, else Debian's newest /usr/lib/postgresql/N/bin."""
    on_path = shutil.which("initdb")
    if on_path and shutil.which("postgres"):
        return Path(on_path).parent
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parts[-3]))
    return Path(found[-1]).parent if found else None


class LocalPostgres:
    """``with LocalPostgres() as pg:`` runs a cluster (no fsync: test data) until the block ends;
    ``pg.database()`` gives a fresh empty database's SQLAlchemy URL. With ``data_dir``: the
    cluster lives in that folder (made by initdb the first time, kept afterwards, fsync on),
    on ``port`` (default: a free one)."""

    def __init__(self, bindir: Path | None = None, data_dir: Path | None = None, port: int = 0) -> None:
        found = bindir or postgres_bindir()
        if found is None:
            raise FileNotFoundError("PostgreSQL not found (bash scripts/sysdeps.sh installs it)")
        self.bindir = found
        self.port = port or free_port()
        self.data_dir = data_dir
        self.proc: subprocess.Popen[bytes] | None = None
        self.tmp: Path | None = None
        self._names = itertools.count()
        self._as: dict[str, Any] = {}
        if os.geteuid() == 0:
            try:
                pw = pwd.getpwnam("postgres")
            except KeyError:
                raise RuntimeError("as root, PostgreSQL runs as the user 'postgres': there is none") from None
            self._as = {"user": pw.pw_uid, "group": pw.pw_gid, "extra_groups": []}

    def url(self, database: str) -> str:
        return f"postgresql+psycopg://{USER}@127.0.0.1:{self.port}/{database}"

    def _run(self, *cmd: str) -> None:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, **self._as)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} failed: {done.stderr[-2000:]}")

    def start(self) -> LocalPostgres:
        self.tmp = Path(tempfile.mkdtemp(prefix="duilian-pg-"))  # the socket (and the throwaway data)
        if self._as:
            os.chown(self.tmp, self._as["user"], self._as["group"])
        data = self.tmp / "data" if self.data_dir is None else self.data_dir
        if not (data / "PG_VERSION").is_file():
            data.mkdir(parents=True, exist_ok=True)
            if self._as:
                os.chown(data, self._as["user"], self._as["group"])
            initdb = str(self.bindir / "initdb")
            self._run(initdb, "-D", str(data), "-U", USER, "--auth=trust", "-E", "UTF8", "--no-locale", "-N")
        throwaway = ("-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off")
        cmd = [
            str(self.bindir / "postgres"),
            *("-D", str(data), "-p", str(self.port), "-k", str(self.tmp)),
            *("-c", "listen_addresses=127.0.0.1", "-c", "max_connections=200"),
            *(throwaway if self.data_dir is None else ()),
        ]
        log = (self.tmp / "postgres.log").open("wb")
        self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, **self._as)
        log.close()
        self._wait_ready()
        return self

    def _wait_ready(self) -> None:
        assert self.proc is not None and self.tmp is not None
        deadline = time.monotonic() + 30
        while True:
            try:
                self._connect().close()
                return
            except psycopg.OperationalError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    log = (self.tmp / "postgres.log").read_text(errors="replace")[-2000:]
                    self.stop()
                    raise RuntimeError(f"postgres did not start:\n{log}") from None
                time.sleep(0.1)

    def ensure_database(self, name: str) -> str:
        """The URL of database ``name``, created if it does not exist yet."""
        with self._connect() as con:
            if con.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone() is None:
                con.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def _admin(self, sql: str) -> None:
        with self._connect() as con:
            con.execute(sql)

    def _connect(self) -> psycopg.Connection[Any]:
        """A connection as the cluster's superuser to its ``postgres`` database (autocommit: no
        transaction holds a CREATE or DROP DATABASE)."""
        return psycopg.connect(
            host="127.0.0.1", port=self.port, user=USER, dbname="postgres", autocommit=True
        )

    @contextmanager
    def database(self) -> Iterator[str]:
        """A new empty database, dropped afterwards (with any connection still open to it)."""
        name = f"test_{next(self._names)}"
        self._admin(f"CREATE DATABASE {name}")
        try:
            yield self.url(name)
        finally:
            self._admin(f"DROP DATABASE {name} WITH (FORCE)")

    def stop(self) -> None:
        if self.proc is not None:
            stop_process(self.proc, signal.SIGINT, timeout=15)  # "fast" shutdown: ends the sessions
            self.proc = None
        if self.tmp is not None:
            shutil.rmtree(self.tmp, ignore_errors=True)
            self.tmp = None

    def __enter__(self) -> LocalPostgres:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
