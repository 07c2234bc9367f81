"""The API rate limit under concurrency and without Redis: real threads, each with its own
PostgreSQL connection, against the real Redis the cache uses."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connection
from django.test import Client

from portal.access.tokens import TokenRateThrottle
from portal.infra import shared_store
from tests.support import bearer

pytestmark = pytest.mark.django_db(transaction=True)

LIMIT = 120


@pytest.fixture
def limit_of(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(TokenRateThrottle, "THROTTLE_RATES", {"token": f"{LIMIT}/minute"})
    shared_store.breaker.reset()
    yield
    shared_store.breaker.reset()


def hammer(headers: dict[str, str], threads: int, each: int) -> Counter[int]:
    """``threads`` threads, each sending ``each`` requests at once, with the same token."""
    barrier = threading.Barrier(threads)
    answers: Counter[int] = Counter()
    lock = threading.Lock()

    def send() -> None:
        try:
            client = Client()
            barrier.wait()
            for _ in range(each):
                status = client.get("/api/v1/teams/", headers=headers).status_code
                with lock:
                    answers[status] += 1
        finally:
            connection.close()

    workers = [threading.Thread(target=send) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return answers


def at_most(started: float) -> float:
    """What a sliding window of a minute may let through in the seconds since ``started``:
    the limit, and, should the requests cross a minute's boundary, what the previous
    minute's weight gives back meanwhile (it shrinks by a sixtieth each second, of at most
    the limit's requests): within 5 % on a quiet machine, more on one that slows the requests
    down."""
    return LIMIT * max(1.05, 1 + (time.monotonic() - started) / 60)


def test_concurrent_requests_against_the_limit_hold_it(demo: None, limit_of: None) -> None:
    started = time.monotonic()
    answers = hammer(bearer("lead-a"), threads=16, each=2 * LIMIT // 16)
    assert set(answers) == {200, 429}
    assert LIMIT * 0.95 <= answers[200] <= at_most(started), answers


def test_the_refusal_says_when_to_come_back(demo: None, limit_of: None) -> None:
    headers = bearer("lead-a")
    client = Client()
    answered = 0
    started = time.monotonic()
    while (refused := client.get("/api/v1/teams/", headers=headers)).status_code == 200:
        answered += 1
        assert answered <= at_most(started)
    assert answered >= LIMIT
    assert refused.status_code == 429
    assert refused.json()["code"] == "throttled"
    assert 1 <= int(refused.headers["Retry-After"]) <= 60


@pytest.fixture
def silent_redis(silent_port: int) -> str:
    """A hung Redis."""
    return f"redis://127.0.0.1:{silent_port}/0"


@pytest.mark.parametrize("store", ["refused", "hung"])
def test_without_redis_the_api_answers_uncounted(
    demo: None, limit_of: None, settings: Any, silent_redis: str, store: str, caplog: Any
) -> None:
    dead = "redis://127.0.0.1:1/0" if store == "refused" else silent_redis
    settings.CACHES = {"default": {**settings.CACHES["default"], "LOCATION": dead}}
    answers = hammer(bearer("lead-a"), threads=4, each=LIMIT // 2)
    assert answers == Counter({200: 2 * LIMIT})  # above the limit: nothing could count
    warnings = [r for r in caplog.records if "Redis is unreachable" in r.getMessage()]
    assert len(warnings) == 1  # said once, not once per request
