"""N replicas of ``python -m serve`` behind HAProxy, sharing one PostgreSQL (feedback) and one
Redis (rate limits): started, watched (a replica that dies is started again on its port) and
stopped together. ``python -m serve.cluster up`` runs one; the tests and ``python -m bench
cluster`` run theirs through ``Cluster``."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from crawler.localredis import LocalRedis, free_port, stop_process
from serve.cluster.haproxy import HAProxy, ProxySetup
from serve.cluster.postgres import LocalPostgres

log = logging.getLogger("serve.cluster")
RESTART_GAP = 5.0  # seconds at least between two starts of one replica


@dataclass
class ClusterSetup:
    """What to run. ``database_url``/``redis_url`` None: a PostgreSQL / a redis-server of its own
    (the PostgreSQL in ``folder/postgres``, kept, unless ``throwaway``)."""

    folder: Path
    replicas: int = 3
    port: int = 0  # the proxy's; 0: a free one
    replica_ports: list[int] = field(default_factory=list)  # default: free ones
    model: Path | None = None
    database_url: str | None = None
    redis_url: str | None = None
    env: dict[str, str] = field(default_factory=dict)  # more DUILIAN_SERVE_* for the replicas
    source: str = "127.0.0.2"  # HAProxy's address toward the replicas: the one proxy they trust
    restart: bool = True  # start a dead replica again
    throwaway: bool = False  # PostgreSQL in a temporary folder, without fsync (tests, benchmarks)
    start_timeout: float = 300.0


@dataclass
class Event:
    at: float  # time.monotonic()
    replica: str
    what: str  # "died", "restarted", "healthy"


class Replica:
    """One ``python -m serve`` on ``port``; its output goes to ``log``."""

    def __init__(self, name: str, port: int, cmd: list[str], env: dict[str, str], log: Path) -> None:
        self.name, self.port, self.cmd, self.env, self.log = name, port, cmd, env, log
        self.proc: subprocess.Popen[bytes] | None = None
        self.restarts = 0
        self.started_at = 0.0  # time.monotonic() of the last start

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(self.cmd, env=self.env, stdout=out, stderr=subprocess.STDOUT)
        self.started_at = time.monotonic()

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}/api/v1/health", timeout=2) as r:
                return r.status == 200
        except (urllib.error.URLError, OSError):
            return False

    def wait_healthy(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not self.healthy():
            if self.proc is not None and self.proc.poll() is not None:
                said = self.log.read_text(encoding="utf-8", errors="replace")[-3000:]
                raise RuntimeError(f"replica {self.name} exited ({self.proc.returncode}):\n{said}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"replica {self.name} not healthy within {timeout:g} s")
            time.sleep(0.1)

    def kill(self, sig: int = signal.SIGKILL) -> None:
        assert self.proc is not None
        self.proc.send_signal(sig)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            stop_process(self.proc, timeout=20)


class Cluster:
    """``with Cluster(setup) as cluster:``: PostgreSQL and Redis (unless given), the replicas
    (each healthy), HAProxy (every replica UP in it), a watcher that restarts a dead replica."""

    def __init__(self, setup: ClusterSetup) -> None:
        self.setup = setup
        self.folder = setup.folder.resolve()
        self.redis: LocalRedis | None = None
        self.postgres: LocalPostgres | None = None
        self.proxy: HAProxy | None = None
        self.replicas: list[Replica] = []
        self.events: list[Event] = []
        self._stopping = threading.Event()
        self._watcher: threading.Thread | None = None
        self.database_url = setup.database_url or ""
        self.redis_url = setup.redis_url or ""
        self.port = setup.port or free_port()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _replica_env(self) -> dict[str, str]:
        return {
            **os.environ,
            "DUILIAN_SERVE_DATABASE_URL": self.database_url,
            "DUILIAN_SERVE_REDIS_URL": self.redis_url,
            "DUILIAN_SERVE_TRUSTED_PROXIES": self.setup.source,
            "DUILIAN_SERVE_SHARED_CACHE": "true",  # generate answers shared through the Redis too
            **self.setup.env,
        }

    def start(self) -> Cluster:
        s = self.setup
        self.folder.mkdir(parents=True, exist_ok=True)
        try:
            if not s.redis_url:
                self.redis = LocalRedis()
                self.redis_url = self.redis.start()
            if not s.database_url:
                self.postgres = LocalPostgres(data_dir=None if s.throwaway else self.folder / "postgres")
                self.database_url = self.postgres.start().ensure_database("duilian")
            ports = s.replica_ports or [free_port() for _ in range(s.replicas)]
            env = self._replica_env()
            for i, port in enumerate(ports[: s.replicas], start=1):
                cmd = [sys.executable, "-m", "serve", "--host", "127.0.0.1", "--port", str(port)]
                cmd += ["--model", str(s.model)] if s.model else []
                self.replicas.append(Replica(f"r{i}", port, cmd, env, self.folder / f"replica-r{i}.log"))
            for r in self.replicas:  # all at once: each loads its model meanwhile
                r.start()
            for r in self.replicas:
                r.wait_healthy(s.start_timeout)
            setup = ProxySetup(self.port, [("127.0.0.1", r.port) for r in self.replicas], s.source)
            self.proxy = HAProxy(setup, self.folder).start()
            self.wait_up(len(self.replicas), 30)
            self._watcher = threading.Thread(target=self._watch, name="cluster-watch", daemon=True)
            self._watcher.start()
        except BaseException:
            self.stop()
            raise
        return self

    def wait_up(self, count: int, timeout: float) -> float:
        """Waits until ``count`` replicas are UP in HAProxy; the seconds it took."""
        assert self.proxy is not None
        start = time.monotonic()
        while len(self.proxy.up()) < count:
            if time.monotonic() - start > timeout:
                raise RuntimeError(f"not {count} replicas up within {timeout:g} s: {self.proxy.up()}")
            time.sleep(0.05)
        return time.monotonic() - start

    def _watch(self) -> None:
        dead: set[str] = set()  # noticed, not started again yet
        while not self._stopping.wait(0.2):
            for r in self.replicas:
                if r.proc is None or r.proc.poll() is None or self._stopping.is_set():
                    continue
                if r.name not in dead:
                    dead.add(r.name)
                    self.events.append(Event(time.monotonic(), r.name, "died"))
                    log.warning("replica %s (port %d) exited with %s", r.name, r.port, r.proc.returncode)
                # one that dies as it starts (a bad bundle, a port taken) is tried every RESTART_GAP s
                if self.setup.restart and time.monotonic() - r.started_at >= RESTART_GAP:
                    dead.discard(r.name)
                    r.restarts += 1
                    r.start()
                    self.events.append(Event(time.monotonic(), r.name, "restarted"))

    def replica(self, name: str) -> Replica:
        return next(r for r in self.replicas if r.name == name)

    def stop(self) -> None:
        self._stopping.set()
        if self._watcher is not None:
            self._watcher.join(timeout=5)
        if self.proxy is not None:
            self.proxy.stop()
        for r in self.replicas:
            r.stop()
        if self.redis is not None:
            self.redis.stop()
        if self.postgres is not None:
            self.postgres.stop()

    def __enter__(self) -> Cluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
