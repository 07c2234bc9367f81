"""PostgreSQL's timestamps read by psycopg's own loader, in C where it has one.

Django 5.2 reads every ``timestamptz`` through its own subclass of psycopg's *Python*
loader (``BaseTzLoader``: parse, then ``replace(tzinfo=...)``), so that a value carries
Django's time zone: a regular expression and a dozen Python calls a value, about 4 µs.
A poll of the scale scenario reads some 190,000 of them (the explainer's lines), a page a
few hundred. psycopg's C loader parses the same text in a fraction of that and gives the
value in the session's time zone, which Django sets to UTC when it connects: the same
aware datetime, with ``datetime.timezone.utc`` as its tzinfo.

:func:`use_fast_timestamps` (on ``connection_created``) registers a loader that keeps the
``timezone`` attribute Django checks on each cursor and hands each value to the C loader;
a session in another zone (a pooler that changed it) gets its values moved to UTC, never
mislabelled. Without psycopg's C part (a pure-Python install) it changes nothing.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import psycopg
from psycopg.adapt import Loader
from psycopg.pq import Format

TIMESTAMPTZ = psycopg.adapters.types["timestamptz"].oid
# The loader psycopg itself registers: its C class where psycopg's C part is installed.
_PSYCOPG_LOADER = psycopg.adapters.get_loader(TIMESTAMPTZ, Format.TEXT)


class UtcTimestamptzLoader(Loader):
    """psycopg's loader, with Django's ``timezone`` attribute (UTC): Django re-registers
    its own loader on a cursor whose loader's ``timezone`` differs from its own."""

    timezone = dt.UTC

    def __init__(self, oid: int, context: Any = None) -> None:
        super().__init__(oid, context)
        loader = _PSYCOPG_LOADER(oid, context)  # type: ignore[misc]
        # psycopg calls ``load`` per value: the C loader's own method, no Python between
        self.load = loader.load  # type: ignore[method-assign]
        if not _session_utc(context):
            self.load = lambda data: loader.load(data).astimezone(dt.UTC)  # type: ignore[method-assign]

    def load(self, data: Any) -> dt.datetime:  # replaced per instance in __init__
        raise NotImplementedError


def _session_utc(context: Any) -> bool:
    connection = getattr(context, "connection", None)
    pgconn = getattr(connection, "pgconn", None)
    return pgconn is None or pgconn.parameter_status(b"TimeZone") == b"UTC"


def use_fast_timestamps(sender: Any, connection: Any, **kwargs: Any) -> None:
    """On a new PostgreSQL connection whose Django time zone is UTC (``USE_TZ`` and no
    ``TIME_ZONE`` of its own): timestamps read by psycopg's loader (module docstring)."""
    if connection.vendor != "postgresql" or _PSYCOPG_LOADER.__module__.startswith("psycopg."):
        return
    if connection.timezone is not dt.UTC:
        return
    connection.connection.adapters.register_loader(TIMESTAMPTZ, UtcTimestamptzLoader)
