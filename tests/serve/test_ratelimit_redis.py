"""The rate limit kept in a real Redis: servers given one Redis share one bucket per client,
a request's cost (the decode budget) takes that many tokens, the API's and the admin route's
buckets stay apart, and with Redis gone each server limits on
its own instead of failing."""

from __future__ import annotations

import asyncio
import shutil
import time
from collections.abc import Iterator

import pytest
from pydantic import ValidationError

from crawler.localredis import LocalRedis
from serve.ratelimit import RateLimiter, RedisRateLimiter, make_limiter
from serve.settings import Settings, settings_problems

pytestmark = pytest.mark.redis


@pytest.fixture
def redis_server() -> Iterator[LocalRedis]:
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server missing (bash scripts/sysdeps.sh installs it)")
    server = LocalRedis()
    server.start()
    yield server
    server.stop()


def test_two_limiters_on_one_redis_share_each_clients_bucket(redis_server: LocalRedis) -> None:
    async def main() -> None:
        # two servers' limiters: 60 a minute, 5 at once; 20 requests alternating between them
        a, b = (RedisRateLimiter(redis_server.url, "test:api", 60, 5) for _ in range(2))
        waits = [await (a if i % 2 else b).take("198.51.100.7") for i in range(20)]
        assert sum(w == 0 for w in waits) in (5, 6)  # the burst, and a token refilled meanwhile at most
        assert all(0 < w <= 1.0 for w in waits[7:])  # a token a second: at most a second's wait
        assert await a.take("198.51.100.8") == 0  # another client has its own bucket
        admin = RedisRateLimiter(redis_server.url, "test:admin", 60, 5)
        assert await admin.take("198.51.100.7") == 0  # and another limiter's name its own buckets
        assert a.fallbacks == b.fallbacks == 0
        for limiter in (a, b, admin):
            await limiter.close()

    asyncio.run(main())


def test_a_bucket_refills_at_the_rate_and_expires_when_full(redis_server: LocalRedis) -> None:
    async def main() -> None:
        limiter = RedisRateLimiter(redis_server.url, "test:api", 600, 1)  # a token each 0.1 s
        assert await limiter.take("c") == 0
        wait = await limiter.take("c")
        assert 0 < wait <= 0.1
        await asyncio.sleep(wait + 0.02)
        assert await limiter.take("c") == 0
        ttl = await limiter.client.pttl("test:api:c")
        assert 0 < ttl <= 1100 + 100  # gone once full again (0.1 s) and a second's grace
        await asyncio.sleep(1.3)
        assert await limiter.client.exists("test:api:c") == 0
        await limiter.close()

    asyncio.run(main())


def test_a_cost_takes_that_many_tokens_across_servers(redis_server: LocalRedis) -> None:
    async def main() -> None:
        # the decode budget: 6,000 a minute (100 a second), 1,000 at once, shared by two servers
        a, b = (RedisRateLimiter(redis_server.url, "test:cost", 6000, 1000) for _ in range(2))
        assert await a.take("long", 600) == 0  # a 60-character line, 10 candidates
        wait = await b.take("long", 600)  # 400 left: 200 short, 2 s at 100 a second
        assert 1.9 <= wait <= 2.0
        assert await b.take("short", 70) == 0  # another client's own budget
        assert await a.take("long", 350) == 0  # what is left still serves a cheaper request
        raw = await a.client.hget("test:cost:long", "tokens")
        assert raw is not None and 0 <= float(raw) < 60  # 1,000 - 600 - 350, and a little refill
        assert await a.take("huge", 5000) == 0  # never more than a full bucket: it could never pass
        assert await a.take("huge", 1) > 0  # and the bucket is empty after it
        assert (a.fallbacks, b.fallbacks) == (0, 0)
        for limiter in (a, b):
            await limiter.close()

    asyncio.run(main())


def test_the_memory_limiter_counts_cost_too() -> None:
    limiter = RateLimiter(6000, 1000)
    assert limiter.allow("c", 600) == 0
    assert 1.9 <= limiter.allow("c", 600) <= 2.0
    assert limiter.allow("c", 350) == 0
    assert RateLimiter(0, 1000).allow("c", 10**6) == 0  # off


def test_without_redis_each_server_limits_on_its_own(redis_server: LocalRedis) -> None:
    async def main() -> None:
        limiter = RedisRateLimiter(redis_server.url, "test:api", 60, 2, retry_after=0.5)
        assert await limiter.take("c") == 0
        redis_server.stop()
        started = time.monotonic()
        waits = [await limiter.take("c") for _ in range(4)]
        assert time.monotonic() - started < 2  # one timed-out try, not one per request
        assert waits[:2] == [0, 0] and all(w > 0 for w in waits[2:])  # this process's bucket: 2 at once
        assert limiter.fallbacks == 4
        await limiter.close()

    asyncio.run(main())


def test_make_limiter_chooses_by_the_settings() -> None:
    assert type(make_limiter(None, "api", 60, 5)) is RateLimiter
    assert type(make_limiter("redis://127.0.0.1:1/0", "api", 0, 5)) is RateLimiter  # off: no Redis
    assert isinstance(make_limiter("redis://127.0.0.1:1/0", "api", 60, 5), RedisRateLimiter)


def test_a_redis_url_of_another_scheme_is_refused_at_start() -> None:
    with pytest.raises(ValidationError) as e:
        Settings(redis_url="http://127.0.0.1:6379/0")
    assert "redis://" in settings_problems(e.value)
    assert Settings(redis_url="").redis_url is None
