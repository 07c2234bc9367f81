"""Usage history computed exactly on hand-made sample series: MIG weighting, gaps while the
poller was down, nodes that disappeared, wait-time percentiles."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from usage import reports
from usage.compute import integrate, mig_weight, percentile
from usage.models import DRA_GPUS, Rollup, Sample, WorkloadRecord
from usage.sampling import roll_up

T0 = dt.datetime(2026, 11, 2, 10, 0, tzinfo=dt.UTC)


def at(minutes: float) -> dt.datetime:
    return T0 + dt.timedelta(minutes=minutes)


def test_a_sample_stands_until_the_next_one_or_the_gap_limit() -> None:
    points = [(at(0), 2.0), (at(5), 2.0), (at(10), 4.0), (at(60), 4.0)]
    # 0-5 and 5-10 at 2; 10-25 at 4 (the poller was down until 60: 15 min max); 60-75 at 4.
    total, covered = integrate(points, at(0), at(120), max_gap=900)
    assert (total, covered) == (2 * 600 + 4 * 900 + 4 * 900, 600 + 900 + 900)
    # Only the window asked for counts, whatever the samples around it.
    assert integrate(points, at(7), at(20), max_gap=900) == (2 * 180 + 4 * 600, 780)
    assert integrate([], at(0), at(60), max_gap=900) == (0.0, 0.0)


def test_mig_profiles_weigh_the_larger_of_their_compute_and_memory_share() -> None:
    assert mig_weight("A100-80GB", "nvidia.com/mig-3g.40gb") == 0.5  # max(3/7, 4/8)
    assert mig_weight("A100-80GB", "nvidia.com/mig-1g.10gb") == 1 / 7  # max(1/7, 1/8)
    assert mig_weight("A100-80GB", "nvidia.com/mig-2g.20gb") == 2 / 7  # max(2/7, 2/8)
    assert mig_weight("A100-40GB", "nvidia.com/mig-1g.10gb") == 0.25  # max(1/7, 2/8)
    assert mig_weight(None, "nvidia.com/mig-1g.10gb", prefer=["A100-80GB"]) == 1 / 7
    assert mig_weight("H100-80GB", "nvidia.com/gpu") == 1.0
    assert mig_weight("H100-80GB", "cpu") == 0.0


def test_percentiles_interpolate_like_postgresql() -> None:
    waits = [60, 120, 180, 240, 3600]
    assert percentile(waits, 0.5) == 180
    assert percentile(waits, 0.9) == pytest.approx(240 + 0.6 * 3360)
    assert percentile([], 0.5) is None


def series(kind: str, owner: str, resource: str, minutes: list[float], **values: Any) -> None:
    Sample.objects.bulk_create(
        Sample(time=at(m), kind=kind, owner=owner, resource=resource, **values) for m in minutes
    )


@pytest.mark.django_db
def test_gpu_hours_with_mig_weighting_and_a_gap(settings: Any) -> None:
    settings.QM_SAMPLE_MAX_GAP_SECONDS = 900
    # team-a runs four 3g.40gb slices (two GPUs' worth) from 10:00 to 12:00, sampled every
    # five minutes, but the poller was down from 10:25 to 11:10.
    minutes = [m for m in range(0, 120, 5) if not 25 < m < 70]
    series(
        "team",
        "team-a",
        "nvidia.com/mig-3g.40gb",
        minutes,
        scope="team-a",
        used=4,
        requested=4,
        gpu_share=4 * mig_weight("A100-80GB", "nvidia.com/mig-3g.40gb"),
        capacity=8,
    )
    # team-b runs one whole GPU from 11:00 to 12:00.
    series(
        "team",
        "team-b",
        "nvidia.com/gpu",
        list(range(60, 120, 5)),
        scope="team-b",
        used=1,
        gpu_share=1,
        capacity=4,
    )
    roll_up(now=at(180))
    assert Rollup.objects.filter(period="hour").count() == 3  # team-a 10:00, 11:00; team-b 11:00
    period = reports.Period(at(0), at(120))
    assert period.granularity == "hour"
    rows = {r["team"]: r for r in reports.gpu_hours(period)}
    # team-a is covered 10:00-10:40 (the 10:25 sample stands for 15 minutes) and 11:10-12:00:
    # 90 minutes of two GPUs' worth; the 30 unknown minutes are not guessed.
    assert rows["team-a"] == {
        "team": "team-a",
        "gpu_hours": 3.0,
        "device_hours": 6.0,
        "clusters": [{"cluster": "default", "gpu_hours": 3.0, "device_hours": 6.0}],
    }
    assert rows["team-b"]["gpu_hours"] == rows["team-b"]["device_hours"] == 1.0
    utilisation = {r["owner"]: r for r in reports.quota_utilisation(period)}
    assert utilisation["team-a/team-a"]["utilisation"] == 0.5  # 4 of 8 while covered
    assert utilisation["team-b/team-b"]["utilisation"] == 0.25
    # Scoped to one team, the other is not there.
    assert [r["team"] for r in reports.gpu_hours(period, teams=["team-b"])] == ["team-b"]


@pytest.mark.django_db
def test_a_node_that_disappears_stops_counting_as_idle(settings: Any) -> None:
    settings.QM_SAMPLE_MAX_GAP_SECONDS = 900
    # Pool train: two 8-slice nodes for the first hour, then one is gone; 8 slices in use.
    series("pool", "train", "nvidia.com/mig-3g.40gb", list(range(0, 60, 5)), capacity=16, used=8)
    series("pool", "train", "nvidia.com/mig-3g.40gb", list(range(60, 120, 5)), capacity=8, used=8)
    roll_up(now=at(180))
    (row,) = reports.idle_capacity(reports.Period(at(0), at(120)))
    assert row == {
        "cluster": "default",
        "pool": "train",
        "resource": "nvidia.com/mig-3g.40gb",
        "average_allocatable": 12.0,
        "average_allocated": 8.0,
        "idle_share": pytest.approx(1 / 3, abs=1e-4),
        "idle_device_hours": 8.0,
        "average_allocatable_by_dra": 0,
        "average_allocated_by_dra": 0,
    }


@pytest.mark.django_db
def test_gpus_held_both_ways_at_once_are_averaged_over_the_hours_not_twice(settings: Any) -> None:
    """A namespace holding GPUs by the device plugin and by DRA in the same hour, and a pool
    serving both ways, have a row per way (the flavor), sampled at the same times: their
    averages add the ways' use over the hours covered once (they had halved)."""
    settings.QM_SAMPLE_MAX_GAP_SECONDS = 900
    every_5 = list(range(0, 60, 5))
    team = {"owner": "team-a", "scope": "team-a"}
    series("team", resource="nvidia.com/gpu", minutes=every_5, used=2, capacity=16, **team)
    series(
        "team", resource="nvidia.com/gpu", minutes=every_5, used=1, flavor="gpu.nvidia.com", **team
    )
    series("pool", "train", "nvidia.com/gpu", every_5, capacity=8, used=2)
    series("pool", "train", "nvidia.com/gpu", every_5, capacity=4, used=1, flavor=DRA_GPUS)
    roll_up(now=at(180))
    period = reports.Period(at(0), at(60))
    (bucket,) = reports.usage_by_bucket(period, teams=["team-a"])
    assert (bucket["average_used"], bucket["quota"], bucket["covered_hours"]) == (3.0, 16.0, 1.0)
    (row,) = reports.idle_capacity(period)
    assert (row["average_allocatable"], row["average_allocated"]) == (12.0, 3.0)
    assert row["idle_device_hours"] == 9.0
    # which way the pool's GPUs were held: 1 of its 4 DRA GPUs, the rest the device plugin's
    assert (row["average_allocated_by_dra"], row["average_allocatable_by_dra"]) == (1.0, 4.0)


@pytest.mark.django_db
def test_days_roll_up_from_hours_and_old_rows_go(settings: Any) -> None:
    settings.QM_SAMPLE_MAX_GAP_SECONDS = 900
    settings.QM_SAMPLE_RETENTION_DAYS = 1
    start = dt.datetime(2026, 11, 2, 0, 0, tzinfo=dt.UTC)
    Sample.objects.bulk_create(
        Sample(
            time=start + dt.timedelta(minutes=m),
            kind="team",
            owner="team-a",
            scope="team-a",
            resource="nvidia.com/gpu",
            used=2,
            gpu_share=2,
        )
        for m in range(0, 24 * 60, 5)
    )
    roll_up(now=start + dt.timedelta(days=2))
    (day,) = Rollup.objects.filter(period="day")
    assert (day.start, day.gpu_seconds / 3600, day.covered_seconds) == (start, 48.0, 86400.0)
    # 24 hours, and 00:00-00:10 the next day (the 23:55 sample stands for 15 minutes).
    assert Rollup.objects.filter(period="hour").count() == 25
    assert not Sample.objects.exists()  # older than a day and rolled up
    rows = reports.gpu_hours(reports.Period(start, start + dt.timedelta(days=2)))
    assert [(r["team"], r["gpu_hours"], r["device_hours"]) for r in rows] == [
        ("team-a", 48.0, 48.0)
    ]


@pytest.mark.django_db
def test_wait_percentiles_per_queue() -> None:
    for index, wait in enumerate([60, 120, 180, 240, 3600]):
        WorkloadRecord.objects.create(
            namespace="team-a",
            name=f"job-{index}",
            cluster_queue="cq-train",
            created_at=at(index),
            admitted_at=at(index) + dt.timedelta(seconds=wait),
        )
    WorkloadRecord.objects.create(  # still waiting: not in the percentiles
        namespace="team-a", name="job-waiting", cluster_queue="cq-train", created_at=at(1)
    )
    (row,) = reports.wait_times(reports.Period(at(0), at(180)))
    assert row == {
        "cluster": "default",
        "cluster_queue": "cq-train",
        "admitted": 5,
        "p50_s": 180.0,
        "p90_s": round(240 + 0.6 * 3360, 1),
        "p99_s": round(240 + 0.96 * 3360, 1),
    }


@pytest.mark.django_db
def test_a_workload_deleted_before_it_finished_closes_its_record() -> None:
    from django.utils import timezone

    from cluster.models import ObservedWorkload
    from cluster.scope import settings_cluster_id
    from usage.sampling import record_workloads

    now = timezone.now()
    ObservedWorkload.objects.create(
        namespace="team-a", name="w", created_at=now - dt.timedelta(minutes=5), last_changed=now
    )
    record_workloads(now, settings_cluster_id())
    assert WorkloadRecord.objects.get().finished_at is None
    ObservedWorkload.objects.all().delete()
    assert record_workloads(now, settings_cluster_id()) == 1
    assert WorkloadRecord.objects.get().finished_at == now


@pytest.mark.django_db
def test_a_requeued_workloads_wait_restarts_at_its_requeue() -> None:
    """Finding 6: admitted after 60 s, run 30 min, evicted (PodsReadyTimeout), requeued,
    admitted again 90 s after the requeue. The wait that counts is the 90 s, never the run
    time before the eviction; while it waits again it is not among the admitted."""
    from cluster.models import ObservedWorkload
    from cluster.scope import settings_cluster_id
    from usage.sampling import record_workloads

    created = at(0)
    observed = ObservedWorkload.objects.create(
        namespace="team-a",
        name="w",
        queue_name="team-a-train",
        cluster_queue="cq-train",
        admitted=True,
        created_at=created,
        queued_at=created,
        admitted_at=created + dt.timedelta(seconds=60),
        last_changed=created,
    )
    record_workloads(created + dt.timedelta(minutes=5), settings_cluster_id())
    period = reports.Period(at(0), at(180))
    assert reports.wait_times(period)[0]["p50_s"] == 60.0
    requeued = created + dt.timedelta(minutes=31)
    ObservedWorkload.objects.filter(pk=observed.pk).update(
        admitted=False, admitted_at=None, queued_at=requeued, evictions=1
    )
    record_workloads(requeued + dt.timedelta(seconds=30), settings_cluster_id())
    assert reports.wait_times(period) == []  # waiting again
    ObservedWorkload.objects.filter(pk=observed.pk).update(
        admitted=True, admitted_at=requeued + dt.timedelta(seconds=90)
    )
    record_workloads(requeued + dt.timedelta(minutes=5), settings_cluster_id())
    record = WorkloadRecord.objects.get()
    assert (record.queued_at, record.admitted_at) == (requeued, requeued + dt.timedelta(seconds=90))
    assert reports.wait_times(period)[0] | {"p90_s": 0, "p99_s": 0} == {
        "cluster": "default",
        "cluster_queue": "cq-train",
        "admitted": 1,
        "p50_s": 90.0,
        "p90_s": 0,
        "p99_s": 0,
    }


NOV = dt.datetime(2026, 11, 1, tzinfo=dt.UTC)


def nov(day: int, hour: int = 0, minute: int = 0) -> dt.datetime:
    return NOV.replace(day=day, hour=hour, minute=minute)


def test_the_last_days_end_with_today_as_far_as_it_is_rolled_up() -> None:
    period = reports.Period.last(7, now=nov(7, 14, 40), rolled_up_to=nov(7, 14))
    assert (period.start, period.end, period.partial_from) == (nov(1), nov(7, 14, 40), nov(7))
    assert period.granularity == "day" and period.buckets() == [nov(d) for d in range(1, 8)]
    assert [period.is_partial(b) for b in period.buckets()] == [False] * 6 + [True]
    # Just after midnight, before yesterday's last hour is rolled up: its hours count so far.
    late = reports.Period.last(7, now=nov(8, 0, 10), rolled_up_to=nov(7, 23))
    assert late.partial_from == nov(7) and late.buckets()[-2:] == [nov(7), nov(8)]
    # Nothing rolled up yet: today is on the axis, empty.
    fresh = reports.Period.last(7, now=nov(7, 14, 40))
    assert fresh.partial_from == nov(7) and fresh.buckets()[-1] == nov(7)
    # One day: the last 24 whole hours, hourly, nothing partial.
    hours = reports.Period.last(1, now=nov(7, 14, 40), rolled_up_to=nov(7, 14))
    assert (hours.start, hours.end, hours.granularity) == (nov(6, 14), nov(7, 14), "hour")
    assert len(hours.buckets()) == 24 and hours.partial_from is None


def rollup(period: str, start: dt.datetime, scope: str, used: float, **values: float) -> Rollup:
    seconds = 86400 if period == "day" else 3600
    return Rollup(
        period=period,
        start=start,
        kind="team",
        owner="team-a",
        scope=scope,
        resource="nvidia.com/gpu",
        covered_seconds=seconds,
        used_seconds=used * seconds,
        gpu_seconds=used * seconds,
        capacity_seconds=values.get("quota", 16) * seconds,
    )


@pytest.mark.django_db
def test_today_counts_its_hours_once_and_is_one_partial_bucket() -> None:
    rows = [rollup("day", nov(d), "team-a", 4) for d in (5, 6)]
    # Nov 6's hours are still kept: the daily rollup counts them, they must not count twice.
    rows += [rollup("hour", nov(6, h), "team-a", 4) for h in range(24)]
    # Today, 14 hours rolled up in two namespaces of the team (8 and 2 GPUs; 16 + 4 quota).
    rows += [rollup("hour", nov(7, h), "team-a", 8) for h in range(14)]
    rows += [rollup("hour", nov(7, h), "team-a-dev", 2, quota=4) for h in range(14)]
    Rollup.objects.bulk_create(rows)
    period = reports.Period.last(7, now=nov(7, 14, 40), rolled_up_to=nov(7, 14))
    buckets = reports.usage_by_bucket(period, teams=["team-a"])
    assert [
        (b["start"], b["average_used"], b["quota"], b["covered_hours"], b["partial"])
        for b in buckets
    ] == [
        (nov(5).isoformat(), 4.0, 16.0, 24.0, False),
        (nov(6).isoformat(), 4.0, 16.0, 24.0, False),
        (nov(7).isoformat(), 10.0, 20.0, 14.0, True),
    ]
    hours = 4 * 48 + 10 * 14
    assert reports.gpu_hours(period) == [
        {
            "team": "team-a",
            "gpu_hours": hours,
            "device_hours": hours,
            "clusters": [{"cluster": "default", "gpu_hours": hours, "device_hours": hours}],
        }
    ]
    assert reports.data_start(period) == nov(5)
    assert reports.usage_by_bucket(period, teams=["team-b"]) == []
    assert reports.usage_by_bucket(period, resource="nvidia.com/mig-3g.40gb") == []
