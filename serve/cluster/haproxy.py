"""HAProxy in front of the replicas: its configuration, its process, and its runtime API.

The configuration (``config``) is the deployment's contract with the proxy; each line says why:

- health checks ``GET /api/v1/health`` every ``inter`` (fast while a replica changes state): a
  replica that does not answer 200 twice in a row is out of rotation (a dead one, or one whose
  decode workers are being replaced: health answers 503 then), and back after two 200s;
- ``observe layer4`` with ``error-limit 1 on-error mark-down``: a replica whose connection is
  refused or reset under real traffic is out at once, without waiting for the next check;
- ``retry-on conn-failure empty-response`` with ``retries`` and ``option redispatch 1``: a
  request that a dead replica never answered (refused, or closed with no byte of answer) is sent
  again, to another replica. HAProxy keeps a request for a retry only if it had the whole of it
  when it sent it, so ``option http-buffer-request`` makes it read the body first (bodies are
  at most 4 KB here); without it a POST whose body came after its headers got a 502. POSTs are
  retried too: feedback carries an ``Idempotency-Key`` so that a feedback a replica stored
  before it died is not stored twice by the retry. A 429 or any other answer is never retried;
- the client's own ``X-Forwarded-For``/``Forwarded`` headers are dropped at the front and
  ``option forwardfor`` writes the address HAProxy saw; HAProxy connects to the replicas from
  ``source`` (127.0.0.2 on one machine), the one address the replicas believe forwarded
  headers from (``DUILIAN_SERVE_TRUSTED_PROXIES``), so a client that reaches a replica directly
  cannot name itself anew in each request.
"""

from __future__ import annotations

import csv
import io
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from crawler.localredis import stop_process

BACKEND = "replicas"


@dataclass(frozen=True)
class ProxySetup:
    """Where HAProxy listens, where the replicas are, and how it watches them."""

    port: int
    replicas: list[tuple[str, int]]  # (host, port) of each replica, named r1, r2, ...
    source: str = "127.0.0.2"  # the address HAProxy connects to the replicas from
    bind: str = "127.0.0.1"
    check_interval_ms: int = 1000
    fast_interval_ms: int = 200  # while a replica is going up or down
    retries: int = 2
    stats_socket: Path | None = None


def config(setup: ProxySetup) -> str:
    servers = "\n".join(
        f"    server r{i} {host}:{port}" for i, (host, port) in enumerate(setup.replicas, start=1)
    )
    stats = f"    stats socket {setup.stats_socket} mode 600 level admin\n" if setup.stats_socket else ""
    return f"""# written by serve/cluster/haproxy.py (python -m serve.cluster); see its docstring
global
    maxconn 4096
    log stdout format raw local0 info
{stats}
defaults
    mode http
    log global
    option httplog
    timeout connect 1s
    timeout client 60s
    timeout server 120s
    timeout http-request 10s
    timeout queue 30s
    timeout check 2s

frontend site
    bind {setup.bind}:{setup.port}
    # the client's own claims about its address are not passed on
    http-request del-header X-Forwarded-For
    http-request del-header Forwarded
    default_backend {BACKEND}

backend {BACKEND}
    balance roundrobin
    option httpchk
    http-check send meth GET uri /api/v1/health
    http-check expect status 200
    option forwardfor
    # the whole body before a replica is chosen: HAProxy keeps a copy for a retry only of a
    # request it has received entirely (a body sent after its headers, as most clients send
    # it, would otherwise go out unbuffered and a POST could not be retried)
    option http-buffer-request
    retries {setup.retries}
    retry-on conn-failure empty-response
    option redispatch 1
    http-response set-header X-Served-By %s
    default-server check inter {setup.check_interval_ms}ms fastinter {setup.fast_interval_ms}ms \
downinter {setup.check_interval_ms}ms fall 2 rise 2 source {setup.source} \
observe layer4 error-limit 1 on-error mark-down
{servers}
"""


def haproxy_binary() -> str | None:
    return shutil.which("haproxy") or next((p for p in ("/usr/sbin/haproxy",) if Path(p).is_file()), None)


class HAProxy:
    """``haproxy -db -f <folder>/haproxy.cfg`` (in the foreground, as this process's child) until
    ``stop``; ``servers()`` reads each replica's state from its runtime API (the stats socket)."""

    def __init__(self, setup: ProxySetup, folder: Path) -> None:
        binary = haproxy_binary()
        if binary is None:
            raise FileNotFoundError("haproxy not found (bash scripts/sysdeps.sh installs it)")
        self.binary = binary
        self.folder = folder.resolve()  # a relative socket path would be read as host:port
        if setup.stats_socket is None:
            setup = ProxySetup(**{**setup.__dict__, "stats_socket": self.folder / "haproxy.sock"})
        self.setup = setup
        self.path = self.folder / "haproxy.cfg"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 10) -> HAProxy:
        self.folder.mkdir(parents=True, exist_ok=True)
        self.path.write_text(config(self.setup))
        checked = subprocess.run([self.binary, "-c", "-f", str(self.path)], capture_output=True)
        if checked.returncode != 0:
            said = (checked.stdout + checked.stderr).decode(errors="replace")
            raise RuntimeError(f"haproxy refuses {self.path}:\n{said[-2000:]}")
        log = (self.folder / "haproxy.log").open("ab")
        self.proc = subprocess.Popen(
            [self.binary, "-db", "-f", str(self.path)], stdout=log, stderr=subprocess.STDOUT
        )
        log.close()
        deadline = time.monotonic() + timeout
        while True:
            try:
                socket.create_connection((self.setup.bind, self.setup.port), timeout=0.5).close()
                return self
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    said = (self.folder / "haproxy.log").read_text(errors="replace")[-2000:]
                    raise RuntimeError(f"haproxy did not start:\n{said}") from None
                time.sleep(0.05)

    def command(self, line: str) -> str:
        """One command of HAProxy's runtime API (``show stat``, ``show servers state``, ...)."""
        assert self.setup.stats_socket is not None
        with socket.socket(socket.AF_UNIX) as s:
            s.settimeout(5)
            s.connect(str(self.setup.stats_socket))
            s.sendall(line.encode() + b"\n")
            chunks = []
            while chunk := s.recv(65536):
                chunks.append(chunk)
        return b"".join(chunks).decode()

    def servers(self) -> dict[str, dict[str, str]]:
        """Each replica's row of ``show stat`` by name (r1, ...): ``status`` (UP, DOWN, and the
        transitions ``UP 1/2``, ``DOWN 1/2``), ``wretr`` (retries), ``wredis`` (redispatches),
        ``hrsp_5xx``, ``chkfail``, ..."""
        text = self.command("show stat").lstrip("# ")
        rows = csv.DictReader(io.StringIO(text))
        return {r["svname"]: r for r in rows if r["pxname"] == BACKEND and r["svname"] not in ("BACKEND",)}

    def up(self) -> list[str]:
        return [name for name, row in self.servers().items() if row["status"] == "UP"]

    def stop(self) -> None:
        if self.proc is not None:
            stop_process(self.proc, timeout=5)
            self.proc = None
