"""Redis as the portal uses it outside Celery: rate limits, metrics, readiness.

Every call is short (half a second to connect, a second to answer) and goes through a
breaker: after a failure the store is skipped for a few seconds, so a Redis that is down or
hung costs one request a timeout, not every request. Callers decide what "down" means for
them (the rate limit lets requests through, metrics go unrecorded); nothing here raises
anything but ``StoreDown``.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable
from typing import TypeVar

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

log = logging.getLogger(__name__)

CONNECT_SECONDS = 0.5
ANSWER_SECONDS = 1.0
# After a failure the store is not asked again for this long.
OPEN_SECONDS = 5.0
# A store that stays down is logged at most this often per purpose.
WARN_EVERY_SECONDS = 60.0

T = TypeVar("T")


class StoreDown(Exception):
    """Redis did not answer (or the breaker is open since it last did not)."""


@functools.cache
def client(url: str) -> redis.Redis:
    return redis.Redis.from_url(
        url,
        socket_timeout=ANSWER_SECONDS,
        socket_connect_timeout=CONNECT_SECONDS,
        # No retries: the breaker decides when to ask again (redis-py retries three times
        # with a backoff by default, which turns one outage into seconds per call).
        retry=Retry(NoBackoff(), 0),
    )


class _Breaker:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.open_until: dict[str, float] = {}
        self.down_since: dict[str, float] = {}
        self.warned: dict[str, float] = {}

    def call(self, url: str, purpose: str, action: Callable[[redis.Redis], T]) -> T:
        now = time.monotonic()
        if self.open_until.get(url, 0.0) > now:
            raise StoreDown(f"Redis did not answer {now - self.down_since[url]:.0f} s ago")
        try:
            result = action(client(url))
        # ValueError: redis-py's reader on a socket closed under it (seen under load).
        except (redis.RedisError, OSError, ValueError) as exc:
            with self.lock:
                self.down_since.setdefault(url, now)
                self.open_until[url] = now + OPEN_SECONDS
                if now - self.warned.get(purpose, -WARN_EVERY_SECONDS) >= WARN_EVERY_SECONDS:
                    self.warned[purpose] = now
                    log.warning("Redis is unreachable (%s goes on without it): %s", purpose, exc)
            raise StoreDown(str(exc)) from exc
        if url in self.down_since:
            with self.lock:
                since = self.down_since.pop(url, None)
                self.open_until.pop(url, None)
            if since is not None:
                log.warning("Redis answers again (%s)", purpose)
        return result

    def reset(self) -> None:
        with self.lock:
            self.open_until.clear()
            self.down_since.clear()
            self.warned.clear()


breaker = _Breaker()


def call(url: str, purpose: str, action: Callable[[redis.Redis], T]) -> T:
    """``action(redis_client)``, or ``StoreDown`` quickly when Redis is not there."""
    return breaker.call(url, purpose, action)
