"""A per-client token bucket: ``rate`` tokens a minute on average, ``burst`` at once; in this
process (one server), or in Redis (``RedisRateLimiter``: replicas behind a load balancer).

A request takes one token from the request bucket; a decode also takes its cost (characters ×
candidates, serve/admission.py) from the cost bucket, a second limiter of the same kind, so a
client of long lines runs out of budget sooner than one of short lines."""

from __future__ import annotations

import logging
import threading
import time

import redis.asyncio as aioredis
from redis import RedisError

log = logging.getLogger("serve")


class RateLimiter:
    def __init__(self, per_minute: float, burst: float, max_clients: int = 100_000) -> None:
        self.rate = per_minute / 60.0
        self.burst = float(max(burst, 1))
        self.max_clients = max_clients
        self._buckets: dict[str, tuple[float, float]] = {}  # client -> (tokens, last time)
        self._lock = threading.Lock()

    @property
    def enabled(self) -> bool:
        return self.rate > 0

    def cost_of(self, cost: float) -> float:
        """What a request of ``cost`` takes: never more than a full bucket, which it could never
        hold (the server's own limits, e.g. ``max_chars``, bound the cost anyway)."""
        return min(max(cost, 0.0), self.burst)

    def allow(self, client: str, cost: float = 1.0) -> float:
        """0 when ``client`` may go ahead (``cost`` tokens are taken), else seconds until it may."""
        if not self.enabled:
            return 0.0
        cost = self.cost_of(cost)
        now = time.monotonic()
        with self._lock:
            tokens, last = self._buckets.get(client, (self.burst, now))
            tokens = min(self.burst, tokens + (now - last) * self.rate)
            if tokens < cost:
                self._buckets[client] = (tokens, now)
                return (cost - tokens) / self.rate
            if len(self._buckets) >= self.max_clients:
                self._buckets.clear()  # a flood of distinct clients: forget, rather than grow
            self._buckets[client] = (tokens - cost, now)
            return 0.0

    async def take(self, client: str, cost: float = 1.0) -> float:
        """``allow`` for the event loop (in memory it never waits on anything)."""
        return self.allow(client, cost)

    async def close(self) -> None:
        """Nothing to close in memory."""


# The same token bucket kept in Redis, so that every replica behind a load balancer takes from
# one bucket per client. One script call reads, refills, takes and writes the bucket atomically
# (Redis runs a script alone), on Redis's clock (TIME), so replicas with skewed clocks agree.
# The bucket expires once it would be full again: an idle client costs no memory.
TAKE = """
local rate, burst, cost = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local held = redis.call('HMGET', KEYS[1], 'tokens', 'last')
local tokens = tonumber(held[1]) or burst
local last = tonumber(held[2]) or now
tokens = math.min(burst, tokens + math.max(0, now - last) * rate)
local wait = 0
if tokens < cost then wait = (cost - tokens) / rate else tokens = tokens - cost end
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'last', tostring(now))
redis.call('PEXPIRE', KEYS[1], math.ceil((burst - tokens) / rate * 1000) + 1000)
return tostring(wait)
"""


class RedisRateLimiter(RateLimiter):
    """``RateLimiter`` with its buckets in Redis (``url``), under ``prefix:client``, asked
    through redis.asyncio so the event loop never waits on a socket. Redis out of reach: this
    process's own buckets stand in (each replica then limits on its own) and Redis is tried again
    ``retry_after`` seconds later, so a dead Redis neither stops the site nor slows every request
    by a connection timeout."""

    def __init__(
        self, url: str, prefix: str, per_minute: float, burst: float, retry_after: float = 5.0
    ) -> None:
        super().__init__(per_minute, burst)
        self.prefix, self.retry_after = prefix, retry_after
        self.client = aioredis.Redis.from_url(url, socket_timeout=0.5, socket_connect_timeout=0.5)
        self.script = self.client.register_script(TAKE)
        self._down_until = 0.0
        self.fallbacks = 0  # decisions taken locally because Redis was out of reach

    async def take(self, client: str, cost: float = 1.0) -> float:
        if not self.enabled:
            return 0.0
        if time.monotonic() >= self._down_until:
            try:
                args = [self.rate, self.burst, self.cost_of(cost)]
                wait = await self.script(keys=[f"{self.prefix}:{client}"], args=args)
                return float(wait)
            except (RedisError, OSError) as exc:
                self._down_until = time.monotonic() + self.retry_after
                log.warning("rate limit: Redis out of reach (%s), limiting in this process", exc)
        self.fallbacks += 1
        return self.allow(client, cost)

    async def close(self) -> None:
        await self.client.aclose()


def make_limiter(redis_url: str | None, name: str, per_minute: float, burst: float) -> RateLimiter:
    """The limiter a server uses: its own buckets, or with ``redis_url`` the buckets every
    server sharing that Redis shares (``name`` keeps the API's, the admin route's and the
    decode cost's apart)."""
    if redis_url and per_minute > 0:
        return RedisRateLimiter(redis_url, f"duilian:ratelimit:{name}", per_minute, burst)
    return RateLimiter(per_minute, burst)
