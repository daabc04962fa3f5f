"""Local servers for tests and benchmarks: a free loopback port, stopping a server process,
a server's spawned worker processes (read from /proc, Linux), a throwaway redis-server."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def stop_process(proc: subprocess.Popen[bytes], sig: int = signal.SIGTERM, timeout: float = 5) -> None:
    """Sends ``sig``; kills the process if it has not ended ``timeout`` seconds later."""
    proc.send_signal(sig)
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _stat(pid: int) -> list[str] | None:
    """The fields of /proc/<pid>/stat after the command name (state first), None if it is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return None


def running(pid: int) -> bool:
    """The process exists and has not ended (a zombie waiting for its parent has ended)."""
    fields = _stat(pid)
    return fields is not None and fields[0] not in ("Z", "X")


def started(pid: int) -> int:
    """When the process started, in clock ticks since boot (0 if it is gone): later is larger."""
    fields = _stat(pid)
    return int(fields[19]) if fields is not None else 0


def cpu_seconds(pid: int) -> float:
    """CPU time the process has used so far, user and system, in seconds (0 if it is gone)."""
    fields = _stat(pid)
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK") if fields is not None else 0.0


def spawned_children(pid: int) -> list[int]:
    """The multiprocessing workers that ``pid`` started (a server's decode workers), from
    /proc: its spawned children, and the children of a forkserver it started; neither its
    resource tracker nor the forkserver itself."""
    table: dict[int, tuple[int, bytes]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ")
        except OSError:
            continue
        table[int(entry.name)] = (int(stat.rsplit(")", 1)[1].split()[1]), cmdline)

    def children(parent: int) -> list[int]:
        return [child for child, (ppid, _) in table.items() if ppid == parent]

    found = []
    for child in children(pid):
        cmdline = table[child][1]
        if b"resource_tracker" in cmdline:
            continue
        if b"forkserver" in cmdline:
            found += children(child)
        elif b"spawn_main" in cmdline:
            found.append(child)
    return sorted(found)


class LocalRedis:
    """``with LocalRedis() as url:`` runs redis-server (no persistence) in a temporary folder."""

    def __init__(self, binary: str = "redis-server") -> None:
        path = shutil.which(binary)
        if path is None:
            raise FileNotFoundError(f"{binary} not found (bash scripts/sysdeps.sh installs it)")
        self.binary = path
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.proc: subprocess.Popen[bytes] | None = None
        self.tmp: tempfile.TemporaryDirectory[str] | None = None

    def start(self) -> str:
        import redis

        self.tmp = tempfile.TemporaryDirectory(prefix="duilian-redis-")
        cmd = [
            self.binary,
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            self.tmp.name,
            "--logfile",
            str(Path(self.tmp.name) / "log"),
        ]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        client = redis.Redis.from_url(self.url)
        deadline = time.monotonic() + 10
        while True:
            try:
                client.ping()
                return self.url
            except redis.ConnectionError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError("redis-server did not start") from None
                time.sleep(0.05)

    def stop(self) -> None:
        if self.proc is not None:
            stop_process(self.proc)
            self.proc = None
        if self.tmp is not None:
            self.tmp.cleanup()
            self.tmp = None

    def __enter__(self) -> str:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
