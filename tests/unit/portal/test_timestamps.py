"""Timestamps read by psycopg's C loader (``portal/infra/timestamps.py``): the same values
as Django's own loader gives, with ``datetime.timezone.utc`` as their zone, and never
mislabelled when a session's time zone is not UTC."""

from __future__ import annotations

import datetime as dt

import pytest
from django.db import connection
from django.db.backends.postgresql.psycopg_any import register_tzloader
from psycopg.pq import Format

from portal.infra.timestamps import TIMESTAMPTZ, UtcTimestamptzLoader

pytestmark = pytest.mark.django_db

VALUES = """
    SELECT t FROM (VALUES
        ('2026-12-07 08:15:30.123456+00'::timestamptz),
        ('2026-03-29 01:59:59.999999+02'::timestamptz),
        ('0001-01-01 00:00:00+00'::timestamptz),
        ('9999-12-31 23:59:59.999999+00'::timestamptz),
        ('1969-12-31 23:59:59.5-05:30'::timestamptz),
        (NULL)
    ) AS v(t)
"""


def read(*, django_loader: bool, where: str = "") -> list[dt.datetime | None]:
    with connection.cursor() as cursor:
        if django_loader:
            register_tzloader(connection.timezone, cursor.cursor)
        cursor.execute(VALUES + where)
        return [row[0] for row in cursor.fetchall()]


def test_the_connection_reads_timestamps_with_psycopgs_loader() -> None:
    connection.ensure_connection()
    loader = connection.connection.adapters.get_loader(TIMESTAMPTZ, Format.TEXT)
    assert loader is UtcTimestamptzLoader
    # each value goes to psycopg's C loader's own method, no Python between
    parser = loader(TIMESTAMPTZ, connection.connection).load
    assert type(parser.__self__).__module__.endswith("._psycopg")


def test_the_values_are_djangos_with_utc_as_their_zone() -> None:
    ours, djangos = read(django_loader=False), read(django_loader=True)
    assert ours == djangos
    assert [v.tzinfo for v in ours if v] == [dt.UTC] * 5
    assert ours[0] == dt.datetime(2026, 12, 7, 8, 15, 30, 123456, tzinfo=dt.UTC)
    assert ours[4] == dt.datetime(1970, 1, 1, 5, 29, 59, 500000, tzinfo=dt.UTC)


def test_a_session_in_another_zone_still_reads_utc() -> None:
    # (year 1 in New York is 2 BC, which neither loader reads)
    after = " WHERE t IS NULL OR t > '1000-01-01'"
    with connection.cursor() as cursor:
        cursor.execute("SET TIME ZONE 'America/New_York'")
    try:
        ours = read(django_loader=False, where=after)
    finally:
        with connection.cursor() as cursor:
            cursor.execute("SET TIME ZONE 'UTC'")
    assert ours == read(django_loader=True, where=after)
    assert ours[0] == dt.datetime(2026, 12, 7, 8, 15, 30, 123456, tzinfo=dt.UTC)
    assert [v.tzinfo for v in ours if v] == [dt.UTC] * 4


def test_a_model_reads_the_same_instant_it_wrote() -> None:
    from cluster.models import SyncRun
    from cluster.services import settings_cluster

    when = dt.datetime(2026, 7, 1, 12, 0, 0, 654321, tzinfo=dt.UTC)
    run = SyncRun.objects.create(cluster=settings_cluster(), started_at=when)
    again = SyncRun.objects.get(pk=run.pk)
    assert again.started_at == when and again.started_at.tzinfo is dt.UTC
