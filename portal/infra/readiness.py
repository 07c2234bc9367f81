"""Liveness and readiness: what a load balancer and an operator need to know."""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass, field

from django.conf import settings
from django.db import connection

from portal.infra import shared_store

# /readyz answers within this, whatever does not answer: a check still running then is
# reported as not answering (and fails readiness only if it is required).
DEADLINE_SECONDS = 0.8

_pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix="readyz")


@dataclass(frozen=True)
class Report:
    """What a check of several parts found (the Kubernetes API of each cluster): its outcome
    and words, and ``detail`` added to its entry (``{"clusters": {name: {...}}}``)."""

    ok: bool
    status: str
    detail: dict[str, object] = field(default_factory=dict)


Check = Callable[[], str | Report]


def check_database() -> str:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
    finally:
        connection.close()  # the check runs in a pool thread: its connection ends with it
    return "ok"


def check_redis() -> str:
    shared_store.call(settings.REDIS_URL, "readiness", lambda r: r.ping())
    return "ok"


def check_outbox() -> str:
    from portal.infra.outbox import unsent  # lazy: models load after settings

    try:
        waiting, oldest = unsent()
    finally:
        connection.close()
    if not waiting:
        return "ok (nothing waiting for the broker)"
    assert oldest is not None
    return f"{waiting} tasks waiting for the broker since {oldest:%Y-%m-%d %H:%M:%S} UTC"


# Readiness fails only on what every page needs: PostgreSQL. What the others report does not
# take the portal out of its Service: with Redis down the pages and the API serve (the rate
# limit lets requests through, tasks wait in the outbox); with the Kubernetes API down the
# pages show the last observed state and accept requests, and the workers retry.
REQUIRED: dict[str, Check] = {"database": check_database}
REPORTED: dict[str, Check] = {"redis": check_redis, "outbox": check_outbox}


def report(name: str, check: Check) -> None:
    """Add a check that /readyz reports without failing on it (apps call this at start-up):
    it answers its status (ok), raises (failed, the exception's words) or gives a
    :class:`Report`."""
    REPORTED[name] = check


def _timed(check: Check) -> tuple[bool, str, float, dict[str, object]]:
    started = time.perf_counter()
    detail: dict[str, object] = {}
    try:
        found = check()
    except Exception as exc:  # a probe reports every failure, it never raises
        ok, status = False, f"failed: {exc}"
    else:
        if isinstance(found, Report):
            ok, detail = found.ok, found.detail
            status = found.status if found.ok else f"failed: {found.status}"
        else:
            ok, status = True, found
    return ok, status, (time.perf_counter() - started) * 1000, detail


def readiness() -> tuple[bool, dict[str, dict[str, object]]]:
    """Each check's outcome and time, all within DEADLINE_SECONDS; ready when every
    required check passed."""
    checks = {**REQUIRED, **REPORTED}
    running = {name: _pool.submit(_timed, check) for name, check in checks.items()}
    wait(running.values(), timeout=DEADLINE_SECONDS)
    results: dict[str, dict[str, object]] = {}
    ready = True
    for name, future in running.items():
        detail: dict[str, object] = {}
        if future.done():
            ok, status, ms, detail = future.result()
        else:
            ok, status, ms = False, f"failed: no answer within {DEADLINE_SECONDS} s", None
        results[name] = {
            "ok": ok,
            "status": status,
            "required": name in REQUIRED,
            "ms": None if ms is None else round(ms, 1),
            **detail,
        }
        if name in REQUIRED and not ok:
            ready = False
    return ready, results
