"""Liveness and readiness: what a load balancer and an operator need to know."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable

import redis
from django.conf import settings
from django.db import connection


@functools.cache
def _redis() -> redis.Redis:
    return redis.Redis.from_url(settings.REDIS_URL, socket_timeout=2, socket_connect_timeout=2)


def check_database() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    return "ok"


def check_redis() -> str:
    _redis().ping()
    return "ok"


# Readiness fails on what every page needs. What the apps above report (the loop: the
# Kubernetes API) does not take the portal out of its Service: during an API server outage
# the pages still show the last observed state and accept requests, and the workers retry.
REQUIRED: dict[str, Callable[[], str]] = {"database": check_database, "redis": check_redis}
REPORTED: dict[str, Callable[[], str]] = {}


def report(name: str, check: Callable[[], str]) -> None:
    """Add a check that /readyz reports without failing on it (apps call this at start-up)."""
    REPORTED[name] = check


def readiness() -> tuple[bool, dict[str, dict[str, object]]]:
    """Each check's outcome and time; ready when every required check passed."""
    results: dict[str, dict[str, object]] = {}
    ready = True
    for name, check in {**REQUIRED, **REPORTED}.items():
        started = time.perf_counter()
        try:
            status, ok = check(), True
        except Exception as exc:  # a probe reports every failure, it never raises
            status, ok = f"failed: {exc}", False
        results[name] = {
            "ok": ok,
            "status": status,
            "required": name in REQUIRED,
            "ms": round((time.perf_counter() - started) * 1000, 1),
        }
        if name in REQUIRED and not ok:
            ready = False
    return ready, results
