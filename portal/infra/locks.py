"""PostgreSQL advisory locks: one holder of a key at a time across every process (one poll or
apply per cluster, one executor per reviewed change). Session locks, tried without waiting:
released on exit, or by PostgreSQL when a killed worker's session ends."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from django.db import connection


@contextmanager
def advisory_lock(*key: int) -> Iterator[bool]:
    """Try the lock on ``key`` (one or two integers): yields whether it was taken, and
    releases it on exit if it was."""
    if len(key) not in (1, 2):
        raise ValueError("an advisory lock's key is one or two integers")
    marks = ", ".join("%s" for _ in key)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT pg_try_advisory_lock({marks})", list(key))
        taken = bool(cursor.fetchone()[0])
    try:
        yield taken
    finally:
        if taken:
            with connection.cursor() as cursor:
                cursor.execute(f"SELECT pg_advisory_unlock({marks})", list(key))
