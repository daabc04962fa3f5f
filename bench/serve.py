"""Server under load: the HTTP API on loopback, a real uvicorn process, the shipped model.

Phases against ``python -m serve`` on 127.0.0.1 (its result cache off, so every request is
a real decode of a distinct test-set upper line):
1. fixed rates, from 100 requests/s down: an async client sends requests on a schedule
   and measures latency from each request's due time (no coordinated omission). The
   first rate answered with p99 ≤ 200 ms and no failed or shed (503) request is the
   sustained rate; the goal is ≥ 100/s on 2 cores. When the model has a proposer, the
   same ladder again with fast-mode requests (``fast_`` figures).
2. that rate again while the model is reloaded (POST /api/v1/admin/reload) three times:
   requests failed by swapping models (goal 0).
3. saturation: Debian's wrk (if installed) with 8 connections: peak requests/s.

``goal_met`` is the goal by the ladder (phase 1), ``goal_met_wrk`` by wrk's closed loop
(phase 3); both also need phase 2 without a failed request.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import httpx

from crawler.localredis import cpu_seconds, free_port, spawned_children, stop_process
from data.paths import ROOT, corpus_dir, data_dir, default_model_dir

FALLBACK_LINES = [
    "春风得意",
    "山高水长",
    "明月照窗前",
    "一帆风顺年年好",
    "绿水青山，千秋画卷",
    "书山有路勤为径",
]
TOKEN = "bench-token"


def upper_lines(limit: int) -> list[str]:
    """Upper lines of the test set (read at run time, never stored), else a few of our own."""
    for path in (data_dir() / "test.tsv", corpus_dir() / "wb14123_test.tsv"):
        if path.is_file():
            with path.open(encoding="utf-8") as f:
                lines = [line.split("\t", 1)[0].strip() for line in f]
            return list(dict.fromkeys(u for u in lines if 0 < len(u) <= 32))[:limit]
    return FALLBACK_LINES


def fallback_bundle(out: Path, preset: str = "cpu") -> Path:
    """A randomly initialised model of a preset's shape (the shipped one's: ``cpu``), when no
    model is shipped: decoding costs the same whatever the weights."""
    import torch

    from data.vocab import Vocab
    from model.net.transformer import CoupletTransformer, ModelConfig
    from model.release.bundle import export_bundle

    spm = data_dir() / "spm.model"
    vocab = Vocab.from_file(spm) if spm.is_file() else Vocab.train(FALLBACK_LINES, out.parent / "spm")
    shape = json.loads((ROOT / "model" / "presets" / f"{preset}.json").read_text())["model"]
    torch.manual_seed(0)
    model = CoupletTransformer(ModelConfig(vocab_size=len(vocab), **shape)).eval()
    return export_bundle(out, model, vocab, version=f"random-{preset}")


def start_server(model: Path, port: int, tmp: Path, timeout: float = 300) -> subprocess.Popen[bytes]:
    """``python -m serve`` on ``port``, once its health answers 200 (its decode workers have started
    their models: minutes when the shared machine is busy). Its log goes to ``tmp/server.log``
    (a pipe nobody reads would fill and stall the server's logging in a long run)."""
    env = {
        **os.environ,
        "DUILIAN_SERVE_DATABASE_URL": f"sqlite:///{tmp / 'feedback.db'}",
        "DUILIAN_SERVE_RATE_LIMIT_PER_MINUTE": "0",
        "DUILIAN_SERVE_CACHE_SIZE": "0",
        "DUILIAN_SERVE_ADMIN_TOKEN": TOKEN,
    }
    cmd = [
        sys.executable,
        "-m",
        "serve",
        "--port",
        str(port),
        "--model",
        str(model),
        "--log-level",
        "warning",
    ]
    log = tmp / "server.log"
    with open(log, "ab") as err:
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=err)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            said = log.read_text(encoding="utf-8", errors="replace")[-4000:]
            raise RuntimeError(f"server exited ({proc.returncode}); the end of {log}:\n{said}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/api/v1/health", timeout=1).status_code == 200:
                return proc
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    proc.kill()
    raise RuntimeError(f"server did not come up in {timeout:g} s")


def wait_known_lines(url: str, timeout: float = 180) -> None:
    """The server indexes the training pairs in the background: let it finish before measuring."""
    if not (data_dir() / "train.tsv").is_file():
        return
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and httpx.get(f"{url}/api/v1/health").json()["known_lines"] == 0:
        time.sleep(0.5)


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


LATENCY_GOAL_MS = 200.0  # the p99 a rate must keep to count as sustained


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


def reload_bundle(port: int, model: Path, http: httpx.AsyncClient) -> Awaitable[httpx.Response]:
    """POST /api/v1/admin/reload of ``model`` (the server's admin token is ``TOKEN``)."""
    return http.post(
        f"http://127.0.0.1:{port}/api/v1/admin/reload",
        json={"model_dir": str(model)},
        headers={"X-Admin-Token": TOKEN},
    )


async def fixed_rate(
    port: int,
    lines: list[str],
    rate: float,
    seconds: float,
    reload_model: Path | None = None,
    extra: dict[str, object] | None = None,
    server_pid: int | None = None,
) -> dict[str, float]:
    """Open-loop load at ``rate`` for ``seconds`` (``schedule``); with ``reload_model``, that
    bundle reloaded three times meanwhile. ``extra``: more fields of every request (e.g.
    ``{"fast": True}``). With ``server_pid`` (and no reload), the CPU the server and its decode
    workers used per answered request, and the load generator's own (``ServerCpu``)."""
    reloads = 0
    cpu = ServerCpu(server_pid) if server_pid is not None and reload_model is None else None

    async def reloader(start: float) -> None:
        nonlocal reloads
        async with httpx.AsyncClient(timeout=120) as http:
            for _ in range(3):
                await asyncio.sleep(seconds / 4)
                assert reload_model is not None
                reloads += (await reload_bundle(port, reload_model, http)).status_code == 200

    sides = [reloader] if reload_model is not None else []
    replies, elapsed = await open_loop(port, lines, schedule(rate, seconds), extra, sides)
    errors = sum(not r.ok for r in replies)
    busy = sum(r.status == 503 for r in replies)
    latencies = [r.latency for r in replies]
    figures = {
        "requests": float(len(replies)),
        "answered_rps": (len(replies) - errors) / elapsed,
        "p50_ms": 1000 * pct(latencies, 0.50),
        "p99_ms": 1000 * pct(latencies, 0.99),
        "failed": float(errors - busy),
        "shed_503": float(busy),
    }
    if reload_model is not None:
        figures["reloads"] = float(reloads)
    if cpu is not None:
        figures.update(cpu.per_request(len(replies) - errors))
    return figures


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


def met(figures: dict[str, float]) -> bool:
    return figures["p99_ms"] <= LATENCY_GOAL_MS and figures["failed"] == 0 and figures["shed_503"] == 0


def wait_idle(url: str, timeout: float = 120) -> None:
    """Let the server finish the backlog of an overloaded phase before the next one."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        start = time.perf_counter()
        httpx.post(f"{url}/api/v1/generate", json={"upper": "春风得意", "n": 5}, timeout=timeout)
        if time.perf_counter() - start < 1.0:
            return


def ladder(
    url: str,
    port: int,
    lines: list[str],
    rates: list[float],
    seconds: float,
    results: dict[str, object],
    prefix: str,
    extra: dict[str, object] | None = None,
    server_pid: int | None = None,
) -> float:
    """Fixed rates from the highest down until one is met; its figures go into ``results``."""
    sustained = 0.0
    for i, rate in enumerate(rates):
        wait_idle(url)
        part = lines[(i * 500) % len(lines) :] + lines  # fresh lines for each phase
        figures = asyncio.run(fixed_rate(port, part, rate, seconds, extra=extra, server_pid=server_pid))
        results.update({f"{prefix}at{rate:g}_{k}": v for k, v in figures.items() if k != "requests"})
        if met(figures):
            sustained = rate
            break
    results[f"{prefix}sustained_rps"] = sustained
    return sustained


@dataclass
class Served:
    """A real ``python -m serve`` on loopback (``served``): its process, port, bundle and the
    figures that describe the setting."""

    proc: subprocess.Popen[bytes]
    port: int
    model: Path
    tmp: Path
    lines: list[str]
    info: dict[str, Any]
    setting: dict[str, object]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


@contextmanager
def served(prefix: str) -> Iterator[Served]:
    """Starts ``python -m serve`` (result cache off, no rate limit, an admin token) on the
    shipped bundle (``DUILIAN_SERVE_MODEL_DIR`` names another; a random one of its shape when
    none is shipped), waits for its known lines, and stops it at the end."""
    lines = upper_lines(4000)
    with tempfile.TemporaryDirectory(prefix=prefix) as name:
        tmp = Path(name)
        model = Path(os.environ.get("DUILIAN_SERVE_MODEL_DIR", default_model_dir()))
        from model.release.bundle import has_model

        shipped = has_model(model)
        if not shipped:
            model = fallback_bundle(tmp / "model")
        port = free_port()
        proc = start_server(model, port, tmp)
        try:
            server = Served(proc, port, model, tmp, lines, {}, {})
            wait_known_lines(server.url)
            server.info = httpx.get(f"{server.url}/api/v1/model", timeout=10).json()
            version = server.info["version"]
            server.setting = {
                "model": version if shipped else f"{version} (no shipped model)",
                "cores": float(os.cpu_count() or 0),
                "load_average_1min": os.getloadavg()[0],  # other work on the machine skews every figure
                "distinct_lines": float(len(lines)),
            }
            yield server
        finally:
            stop_process(proc, timeout=20)


def rate_ladder(quick: bool) -> tuple[list[float], float]:
    """The rates tried (requests/s, highest first) and the seconds at each."""
    if quick:
        return [100.0, 50.0, 25.0, 12.0, 6.0], 5.0
    return [100.0, 85.0, 70.0, 50.0, 35.0, 25.0, 18.0, 12.0, 8.0, 5.0], 15.0


def run(args: Any) -> dict[str, object]:
    quick = bool(getattr(args, "quick", False))
    rates, seconds = rate_ladder(quick)
    with served("bench-serve-") as server:
        url, port, lines, model = server.url, server.port, server.lines, server.model
        results: dict[str, object] = dict(server.setting)
        pid = server.proc.pid
        sustained = ladder(url, port, lines, rates, seconds, results, "", server_pid=pid)
        if server.info.get("fast_mode"):  # the same ladder for requests in the fast mode
            ladder(url, port, lines[::-1], rates, seconds, results, "fast_", {"fast": True}, pid)
        wait_idle(url)
        reload_rate = sustained or rates[-1]
        figures = asyncio.run(fixed_rate(port, lines[::-1], reload_rate, max(seconds, 8.0), model))
        results.update({f"reload_{k}": v for k, v in figures.items()})
        if shutil.which("wrk"):
            wait_idle(url)
            results.update(saturation_wrk(url, lines[::-1], 5 if quick else 15, 8, server.tmp))
    # the goal (docs/MEASUREMENTS.md): >= 100 requests/s at p99 <= 200 ms, no errors, no failure
    # during reloads; by the open-loop ladder (latency from each request's due time, the Python
    # load generator sharing the two cores), and by wrk's closed loop (8 connections)
    reloads_ok = results["reload_failed"] == 0
    results["goal_met"] = float(sustained >= 100 and reloads_ok)
    if "wrk_rps" in results:
        wrk = {k: float(cast(float, results.get(k, 1e9))) for k in ("wrk_rps", "wrk_p99_ms", "wrk_errors")}
        wrk_ok = wrk["wrk_rps"] >= 100 and wrk["wrk_p99_ms"] <= 200 and wrk["wrk_errors"] == 0
        results["goal_met_wrk"] = float(wrk_ok and reloads_ok)
    return results
