"""Several reads in one round trip: each read's rows as a raw queryset gives them."""

from __future__ import annotations

import datetime as dt

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from changes.models import MigChangeRequest
from cluster.models import ObservedPod
from portal.batch import Read, read_together
from tests.factories import MigChangeRequestFactory, ObservedPodFactory

pytestmark = pytest.mark.django_db

FIELDS = [f.attname for f in ObservedPod._meta.concrete_fields]


def test_each_reads_rows_come_back_in_one_round_trip_as_a_raw_queryset_gives_them() -> None:
    started = timezone.now() - dt.timedelta(minutes=5)
    ObservedPodFactory(
        name="train-0",
        phase="Pending",
        gpu_requests={"nvidia.com/mig-3g.40gb": 2},
        started_at=started,
        pending_message="0/3 nodes are available",
    )
    ObservedPodFactory(name="notebook", gpu_requests={"nvidia.com/gpu": 1})
    MigChangeRequestFactory(assessment={"verdict": "needs_drain", "evictions": [{"team": "a"}]})
    pods_sql = f"SELECT * FROM {ObservedPod._meta.db_table} WHERE namespace = %s ORDER BY name"
    changes_sql = f"SELECT * FROM {MigChangeRequest._meta.db_table} WHERE state = ANY(%s)"
    with CaptureQueriesContext(connection) as captured:
        pods, counted, changes = read_together(
            Read(pods_sql, ["team-a"], ObservedPod),
            Read("SELECT count(*), %s::text FROM fleet_observedpod", ["pods"]),
            Read(changes_sql, [["pending"]], MigChangeRequest),
        )
    assert len(captured) == 1
    raw = list(ObservedPod.objects.raw(pods_sql, ["team-a"]))
    assert [p.name for p in pods] == ["notebook", "train-0"]
    for mine, theirs in zip(pods, raw, strict=True):
        assert isinstance(mine, ObservedPod) and not mine._state.adding
        assert {f: getattr(mine, f) for f in FIELDS} == {f: getattr(theirs, f) for f in FIELDS}
    assert pods[1].gpu_requests == {"nvidia.com/mig-3g.40gb": 2}  # jsonb decoded
    assert pods[1].started_at == started
    assert counted == [(2, "pods")]
    assert changes[0].assessment["evictions"] == [{"team": "a"}]
    assert changes[0].team.slug  # a related object is read as the ORM reads it


def test_a_column_the_read_leaves_out_is_deferred_and_read_when_asked() -> None:
    ObservedPodFactory(name="x", pending_message="why")
    (pods,) = read_together(
        Read(f"SELECT id, name FROM {ObservedPod._meta.db_table}", [], ObservedPod)
    )
    assert pods[0].name == "x"
    assert "pending_message" in pods[0].get_deferred_fields()
    assert pods[0].pending_message == "why"


def test_no_read_costs_no_query_and_a_read_is_one_statement() -> None:
    with CaptureQueriesContext(connection) as captured:
        assert read_together() == []
    assert len(captured) == 0
    with pytest.raises(ValueError, match="one statement"):
        read_together(Read("SELECT 1; SELECT 2"))
