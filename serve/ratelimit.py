"""A per-client token bucket: ``rate`` requests a minute on average, ``burst`` at once."""

from __future__ import annotations

import threading
import time


class RateLimiter:
    def __init__(self, per_minute: float, burst: int, max_clients: int = 100_000) -> None:
        self.rate = per_minute / 60.0
        self.burst = float(max(burst, 1))
        self.max_clients = max_clients
        self._buckets: dict[str, tuple[float, float]] = {}  # client -> (tokens, last time)
        self._lock = threading.Lock()

    @property
    def enabled(self) -> bool:
        return self.rate > 0

    def allow(self, client: str) -> float:
        """0 when ``client`` may go ahead (one token is taken), else seconds until it may."""
        if not self.enabled:
            return 0.0
        now = time.monotonic()
        with self._lock:
            tokens, last = self._buckets.get(client, (self.burst, now))
            tokens = min(self.burst, tokens + (now - last) * self.rate)
            if tokens < 1.0:
                self._buckets[client] = (tokens, now)
                return (1.0 - tokens) / self.rate
            if len(self._buckets) >= self.max_clients:
                self._buckets.clear()  # a flood of distinct clients: forget, rather than grow
            self._buckets[client] = (tokens - 1.0, now)
            return 0.0
