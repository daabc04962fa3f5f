"""The benchmarks' load generators: an open loop on raw keep-alive connections (requests
sent on a schedule, latency counted from each one's due time), wrk's closed loop, and the
CPU the server and its decode workers used per request.
"""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from crawler.localredis import cpu_seconds, spawned_children


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


class Connections:
    """Keep-alive HTTP/1.1 connections on raw asyncio streams: a load generator light enough
    not to compete with the server for the same two cores (httpx costs several times more)."""

    def __init__(self, port: int) -> None:
        self.port = port
        self._idle: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []

    async def post(self, path: str, body: dict[str, object]) -> tuple[int, bytes]:
        data = json.dumps(body, ensure_ascii=False).encode()
        head = (
            f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(data)}\r\n\r\n"
        ).encode()
        while self._idle:  # a kept-alive connection the server may have closed since (idle timeout)
            reader, writer = self._idle.pop()
            answer = await self._exchange(reader, writer, head + data)
            if answer is not None:
                return answer
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", self.port)
        except OSError:  # refused or reset: counted as a failed request, the run goes on
            return 0, b""
        return await self._exchange(reader, writer, head + data) or (0, b"")

    async def _exchange(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, request: bytes
    ) -> tuple[int, bytes] | None:
        """The status and body of one request on this connection; None if it was closed
        before any answer, (0, b"") if it failed midway."""
        try:
            writer.write(request)
            status_line = await reader.readline()
        except OSError:
            status_line = b""
        if not status_line:
            writer.close()
            return None
        try:
            length = 0
            while (line := await reader.readline()) not in (b"\r\n", b""):
                name, _, value = line.decode("latin-1").partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value)
            payload = await reader.readexactly(length)
        except (OSError, asyncio.IncompleteReadError, ValueError):
            writer.close()
            return 0, b""
        self._idle.append((reader, writer))
        return int(status_line.split()[1]), payload

    def close(self) -> None:
        for _, writer in self._idle:
            writer.close()


def schedule(rate: float, seconds: float) -> list[float]:
    """Open loop: request i is due ``i / rate`` seconds after the start, whatever the answers."""
    return [i / rate for i in range(int(rate * seconds))]


@dataclass(frozen=True)
class Reply:
    """One request of an open-loop run: when it was due and answered (seconds from the start),
    its HTTP status (0: no answer, the connection failed) and whether it carried candidates."""

    due: float
    done: float
    status: int
    ok: bool

    @property
    def latency(self) -> float:
        return self.done - self.due


Side = Callable[[float], Awaitable[None]]  # more work during a run, given its start (perf_counter)


async def open_loop(
    port: int,
    lines: list[str],
    dues: list[float],
    extra: dict[str, object] | None = None,
    sides: Sequence[Side] = (),
) -> tuple[list[Reply], float]:
    """Sends request i at ``dues[i]`` (a generate of ``lines[i % len(lines)]``, 5 candidates,
    ``extra`` fields added), latency counted from that moment (no coordinated omission), while
    ``sides`` run (reloads, kills); the replies in order, and the seconds the run took."""
    conns = Connections(port)
    start = time.perf_counter() + 0.2
    replies: list[Reply] = []

    async def one(i: int) -> None:
        await asyncio.sleep(max(0.0, start + dues[i] - time.perf_counter()))
        body = {"upper": lines[i % len(lines)], "n": 5, **(extra or {})}
        status, payload = await conns.post("/api/v1/generate", body)
        ok = status == 200 and bool(json.loads(payload)["candidates"])
        replies.append(Reply(dues[i], time.perf_counter() - start, status, ok))

    await asyncio.gather(*(one(i) for i in range(len(dues))), *(side(start) for side in sides))
    elapsed = time.perf_counter() - start
    conns.close()
    return sorted(replies, key=lambda r: r.due), elapsed


class ServerCpu:
    """CPU seconds used from its start by the server process and by its decode workers (from
    /proc), and by this process (the load generator, which shares the cores): per answered
    request, a figure that holds across the machine's fast and slow phases better than a rate
    does (two cores give at most 2,000 ms of CPU a second)."""

    def __init__(self, server_pid: int) -> None:
        self.server_pid, self.workers = server_pid, spawned_children(server_pid)
        self.start = self._used()

    def _used(self) -> tuple[float, float, float]:
        workers = sum(cpu_seconds(p) for p in self.workers)
        return cpu_seconds(self.server_pid), workers, time.process_time()

    def per_request(self, answered: int) -> dict[str, float]:
        now, n = self._used(), max(answered, 1)
        server, workers, client = (1000 * (b - a) / n for a, b in zip(self.start, now, strict=True))
        return {
            "server_cpu_ms_per_request": server + workers,
            "server_process_cpu_ms_per_request": server,
            "workers_cpu_ms_per_request": workers,
            "client_cpu_ms_per_request": client,
        }


def _ms(text: str) -> float:
    m = re.fullmatch(r"([\d.]+)(us|ms|s|m)", text)
    if not m:
        return float("nan")
    return float(m.group(1)) * {"us": 1e-3, "ms": 1.0, "s": 1e3, "m": 6e4}[m.group(2)]


def saturation_wrk(url: str, lines: list[str], seconds: int, connections: int, tmp: Path) -> dict[str, float]:
    # Lua long strings hold the UTF-8 JSON as is (Lua has no \\u escapes)
    body_list = ",".join(
        "[==[" + json.dumps({"upper": u, "n": 5}, ensure_ascii=False) + "]==]" for u in lines
    )
    script = tmp / "generate.lua"
    script.write_text(
        f"local bodies = {{{body_list}}}\nlocal i = 0\n"
        "request = function()\n  i = i + 1\n"
        '  return wrk.format("POST", "/api/v1/generate", {["Content-Type"] = "application/json"},'
        " bodies[(i % #bodies) + 1])\nend\n",
        encoding="utf-8",
    )
    cmd = [
        "wrk",
        f"-t{min(2, connections)}",
        f"-c{connections}",
        f"-d{seconds}s",
        "--timeout",
        "30s",
        "--latency",
        "-s",
        str(script),
        url,
    ]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds + 60).stdout
    (tmp / "wrk.txt").write_text(out)
    figures = {"wrk_connections": float(connections)}
    if m := re.search(r"Requests/sec:\s+([\d.]+)", out):
        figures["wrk_rps"] = float(m.group(1))
    for q in ("50", "99"):
        if m := re.search(rf"^\s+{q}%\s+(\S+)", out, re.M):
            figures[f"wrk_p{q}_ms"] = _ms(m.group(1))
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    sock = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    figures["wrk_errors"] = float(
        (int(non2xx.group(1)) if non2xx else 0) + (sum(map(int, sock.groups())) if sock else 0)
    )
    return figures
