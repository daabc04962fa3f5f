"""The rate limit kept in a real Redis: servers given one Redis share one bucket per client,
the API's and the admin route's buckets stay apart, and with Redis gone each server limits on
its own instead of failing."""

from __future__ import annotations

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
    # two servers' limiters: 60 a minute, 5 at once; 20 requests alternating between them
    a, b = (RedisRateLimiter(redis_server.url, "test:api", 60, 5) for _ in range(2))
    waits = [(a if i % 2 else b).allow("198.51.100.7") for i in range(20)]
    assert sum(w == 0 for w in waits) in (5, 6)  # the burst, and a token refilled meanwhile at most
    assert all(0 < w <= 1.0 for w in waits[7:])  # a token a second: at most a second's wait
    assert a.allow("198.51.100.8") == 0  # another client has its own bucket
    admin = RedisRateLimiter(redis_server.url, "test:admin", 60, 5)
    assert admin.allow("198.51.100.7") == 0  # and another limiter's name its own buckets
    assert a.fallbacks == b.fallbacks == 0


def test_a_bucket_refills_at_the_rate_and_expires_when_full(redis_server: LocalRedis) -> None:
    limiter = RedisRateLimiter(redis_server.url, "test:api", 600, 1)  # a token each 0.1 s
    assert limiter.allow("c") == 0
    wait = limiter.allow("c")
    assert 0 < wait <= 0.1
    time.sleep(wait + 0.02)
    assert limiter.allow("c") == 0
    ttl = limiter.client.pttl("test:api:c")
    assert 0 < ttl <= 1100 + 100  # gone once full again (0.1 s) and a second's grace
    time.sleep(1.3)
    assert limiter.client.exists("test:api:c") == 0


def test_without_redis_each_server_limits_on_its_own(redis_server: LocalRedis) -> None:
    limiter = RedisRateLimiter(redis_server.url, "test:api", 60, 2, retry_after=0.5)
    assert limiter.allow("c") == 0
    redis_server.stop()
    started = time.monotonic()
    waits = [limiter.allow("c") for _ in range(4)]
    assert time.monotonic() - started < 2  # one timed-out try, not one per request
    assert waits[:2] == [0, 0] and all(w > 0 for w in waits[2:])  # this process's bucket: 2 at once
    assert limiter.fallbacks == 4


def test_make_limiter_chooses_by_the_settings() -> None:
    assert type(make_limiter(None, "api", 60, 5)) is RateLimiter
    assert type(make_limiter("redis://127.0.0.1:1/0", "api", 0, 5)) is RateLimiter  # off: no Redis
    assert isinstance(make_limiter("redis://127.0.0.1:1/0", "api", 60, 5), RedisRateLimiter)


def test_a_redis_url_of_another_scheme_is_refused_at_start() -> None:
    with pytest.raises(ValidationError) as e:
        Settings(redis_url="http://127.0.0.1:6379/0")
    assert "redis://" in settings_problems(e.value)
    assert Settings(redis_url="").redis_url is None
