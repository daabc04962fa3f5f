"""The mirror's HTTP server: serves a ``Site`` on 127.0.0.1 from a thread and counts hits."""

from __future__ import annotations

import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from crawler.mirror.pages import Page, Site


class _QuietServer(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a crawler killed mid-request resets its connections: expected in the tests


class MirrorServer:
    """Serves a Site on 127.0.0.1 (a free port) from a thread; counts hits per path."""

    def __init__(self, site: Site, latency: float = 0.0, port: int = 0, held: bool = False) -> None:
        """``latency``: seconds added to every answer. ``held``: answer nothing until
        ``release()`` (at most 60 s), so that several crawlers start at the same moment."""
        self.site = site
        self.latency = latency
        self._open = threading.Event()
        if not held:
            self._open.set()
        self.hits: Counter[str] = Counter()
        self.agents: Counter[str] = Counter()
        self.first_hit: float | None = None  # time.monotonic() of the first and last request
        self.last_hit: float | None = None
        self._lock = threading.Lock()
        self._server = _QuietServer(("127.0.0.1", port), self._handler())
        self._server.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def url(self, path: str = "/") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        mirror = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:
                path = self.path.split("?", 1)[0]
                with mirror._lock:
                    mirror.hits[path] += 1
                    mirror.agents[self.headers.get("User-Agent", "")] += 1
                mirror._open.wait(timeout=60)
                with mirror._lock:
                    mirror.first_hit = mirror.first_hit or time.monotonic()
                if mirror.latency:
                    time.sleep(mirror.latency)
                page = mirror.site.pages.get(path) or Page(404, b"Not Found", {"Content-Type": "text/plain"})
                self.send_response(page.status)
                for key, value in page.headers.items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(page.body)))
                self.end_headers()
                self.wfile.write(page.body)
                mirror.last_hit = time.monotonic()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        return Handler

    def release(self) -> None:
        self._open.set()

    def start(self) -> MirrorServer:
        self._thread = threading.Thread(target=self._server.serve_forever, name="mirror", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        if self._thread:
            self._thread.join()

    def __enter__(self) -> MirrorServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
