"""Reports over the usage rollups: GPU-hours, quota utilisation, wait times, borrowing and
lending, idle capacity, and suggestions. Each report is a list of flat rows (the same for
the page, the API and CSV)."""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.db import connection
from django.db.models import Max, Sum
from django.utils import timezone

from usage.models import Rollup, Sample, WorkloadRecord

HOUR = 3600.0


@dataclass(frozen=True)
class Period:
    start: dt.datetime
    end: dt.datetime

    @property
    def granularity(self) -> str:
        return "day" if (self.end - self.start) >= dt.timedelta(days=2) else "hour"

    @property
    def adjective(self) -> str:
        return {"day": "daily", "hour": "hourly"}[self.granularity]

    @classmethod
    def last(cls, days: int, now: dt.datetime | None = None) -> Period:
        now = now or timezone.now()
        end = now.replace(minute=0, second=0, microsecond=0)
        if days >= 2:
            end = end.replace(hour=0)
        return cls(end - dt.timedelta(days=days), end)


def _rollups(period: Period, kind: str) -> Any:
    return Rollup.objects.filter(
        period=period.granularity, kind=kind, start__gte=period.start, start__lt=period.end
    )


def _scoped(rows: Any, teams: Iterable[str] | None) -> Any:
    return rows if teams is None else rows.filter(owner__in=list(teams))


def gpu_hours(
    period: Period, *, by: str = "team", teams: Iterable[str] | None = None
) -> list[dict[str, Any]]:
    """GPU-hours (MIG profiles weighted by their share of a GPU) and device-hours per team,
    namespace, resource, or ClusterQueue flavor and resource (``by="queue"``: what the
    queues admitted, not team data, so never scoped)."""
    if by == "queue":
        kind, fields = Sample.Kind.QUEUE, ["owner", "flavor", "resource"]
        names = {"owner": "cluster_queue", "flavor": "flavor", "resource": "resource"}
        rollups = _rollups(period, kind)
    else:
        kind = Sample.Kind.TEAM
        fields = {
            "team": ["owner"],
            "namespace": ["owner", "scope"],
            "resource": ["owner", "resource"],
        }[by]
        names = {"owner": "team", "scope": "namespace", "resource": "resource"}
        rollups = _scoped(_rollups(period, kind), teams)
    rows = (
        rollups.values(*fields)
        .annotate(gpu=Sum("gpu_seconds"), devices=Sum("used_seconds"))
        .order_by(*fields)
    )
    return [
        {
            **{names[f]: row[f] for f in fields},
            "gpu_hours": round(row["gpu"] / HOUR, 3),
            "device_hours": round(row["devices"] / HOUR, 3),
        }
        for row in rows
    ]


def quota_utilisation(
    period: Period, *, teams: Iterable[str] | None = None
) -> list[dict[str, Any]]:
    """Average use against the namespace quota (requests.<resource>) and, per ClusterQueue,
    against its nominal quota."""
    out = []
    team_rows = (
        _scoped(_rollups(period, Sample.Kind.TEAM), teams)
        .exclude(capacity_seconds=0)
        .values("owner", "scope", "resource")
        .annotate(
            used=Sum("used_seconds"), cap=Sum("capacity_seconds"), covered=Sum("covered_seconds")
        )
        .order_by("owner", "scope", "resource")
    )
    for row in team_rows:
        out.append(
            {
                "level": "namespace quota",
                "owner": f"{row['owner']}/{row['scope']}",
                "resource": row["resource"],
                "average_used": round(row["used"] / row["covered"], 3) if row["covered"] else 0,
                "average_limit": round(row["cap"] / row["covered"], 3) if row["covered"] else 0,
                "utilisation": round(row["used"] / row["cap"], 4) if row["cap"] else None,
            }
        )
    if teams is None:
        queue_rows = (
            _rollups(period, Sample.Kind.QUEUE)
            .values("owner", "flavor", "resource")
            .annotate(
                used=Sum("used_seconds"),
                cap=Sum("capacity_seconds"),
                covered=Sum("covered_seconds"),
            )
            .order_by("owner", "flavor", "resource")
        )
        for row in queue_rows:
            out.append(
                {
                    "level": "ClusterQueue nominal",
                    "owner": f"{row['owner']} ({row['flavor']})",
                    "resource": row["resource"],
                    "average_used": round(row["used"] / row["covered"], 3) if row["covered"] else 0,
                    "average_limit": round(row["cap"] / row["covered"], 3) if row["covered"] else 0,
                    "utilisation": round(row["used"] / row["cap"], 4) if row["cap"] else None,
                }
            )
    return out


def wait_times(period: Period) -> list[dict[str, Any]]:
    """Per ClusterQueue: workloads admitted in the period and their wait at the 50th, 90th
    and 99th percentile, in seconds (PostgreSQL's percentile_cont). The wait is admitted -
    queued: from the creation, or from the requeue after an eviction to the admission that
    followed (never the time a workload ran before Kueue evicted it)."""
    sql = f"""
        SELECT cluster_queue, count(*),
               percentile_cont(ARRAY[0.5, 0.9, 0.99]) WITHIN GROUP (
                   ORDER BY extract(epoch FROM admitted_at - coalesce(queued_at, created_at)))
        FROM {WorkloadRecord._meta.db_table}
        WHERE admitted_at >= %s AND admitted_at < %s
        GROUP BY cluster_queue ORDER BY cluster_queue
    """
    with connection.cursor() as cursor:
        cursor.execute(sql, [period.start, period.end])
        rows = cursor.fetchall()
    return [
        {
            "cluster_queue": queue or "(no queue)",
            "admitted": count,
            "p50_s": round(p[0], 1),
            "p90_s": round(p[1], 1),
            "p99_s": round(p[2], 1),
        }
        for queue, count, p in rows
    ]


def borrowing(period: Period) -> list[dict[str, Any]]:
    """Per ClusterQueue, flavor and resource: average borrowed from the cohort and lent to it
    (lent is estimated: Kueue reports who borrows, not who lends)."""
    rows = (
        _rollups(period, Sample.Kind.QUEUE)
        .values("scope", "owner", "flavor", "resource")
        .annotate(
            b=Sum("borrowed_seconds"), lent=Sum("lent_seconds"), covered=Sum("covered_seconds")
        )
        .order_by("scope", "owner", "flavor", "resource")
    )
    return [
        {
            "cohort": row["scope"] or "(none)",
            "cluster_queue": row["owner"],
            "flavor": row["flavor"],
            "resource": row["resource"],
            "average_borrowed": round(row["b"] / row["covered"], 3) if row["covered"] else 0,
            "average_lent": round(row["lent"] / row["covered"], 3) if row["covered"] else 0,
            "borrowed_hours": round(row["b"] / HOUR, 3),
            "lent_hours": round(row["lent"] / HOUR, 3),
        }
        for row in rows
    ]


def idle_capacity(period: Period) -> list[dict[str, Any]]:
    """Per pool and GPU resource (whole GPUs and each MIG profile): average allocatable,
    allocated and idle, and idle device-hours."""
    rows = (
        _rollups(period, Sample.Kind.POOL)
        .values("owner", "resource")
        .annotate(
            used=Sum("used_seconds"), cap=Sum("capacity_seconds"), covered=Sum("covered_seconds")
        )
        .order_by("owner", "resource")
    )
    out = []
    for row in rows:
        covered = row["covered"] or 0
        out.append(
            {
                "pool": row["owner"],
                "resource": row["resource"],
                "average_allocatable": round(row["cap"] / covered, 3) if covered else 0,
                "average_allocated": round(row["used"] / covered, 3) if covered else 0,
                "idle_share": round(1 - row["used"] / row["cap"], 4) if row["cap"] else None,
                "idle_device_hours": round((row["cap"] - row["used"]) / HOUR, 3),
            }
        )
    return out


def usage_by_bucket(period: Period, *, teams: Iterable[str] | None = None) -> list[dict[str, Any]]:
    """The data behind the usage charts: per team, bucket and resource."""
    rows = (
        _scoped(_rollups(period, Sample.Kind.TEAM), teams)
        .values("owner", "start", "resource")
        .annotate(
            used=Sum("used_seconds"), cap=Sum("capacity_seconds"), covered=Max("covered_seconds")
        )
        .order_by("owner", "start", "resource")
    )
    return [
        {
            "team": row["owner"],
            "start": row["start"].isoformat(),
            "resource": row["resource"],
            "average_used": round(row["used"] / row["covered"], 3) if row["covered"] else 0,
            "quota": round(row["cap"] / row["covered"], 3) if row["covered"] else 0,
        }
        for row in rows
    ]


def usage_over_time(period: Period, team: str) -> list[dict[str, Any]]:
    """A team's average use and quota per bucket and resource (the team page's chart)."""
    rows = (
        _rollups(period, Sample.Kind.TEAM)
        .filter(owner=team)
        .values("start", "resource")
        .annotate(
            used=Sum("used_seconds"), cap=Sum("capacity_seconds"), covered=Max("covered_seconds")
        )
        .order_by("start", "resource")
    )
    return [
        {
            "start": row["start"],
            "resource": row["resource"],
            "average_used": round(row["used"] / row["covered"], 3) if row["covered"] else 0,
            "quota": round(row["cap"] / row["covered"], 3) if row["covered"] else 0,
        }
        for row in rows
    ]


def insights(
    period: Period, *, unused_below: float = 0.3, idle_above: float = 0.5
) -> list[dict[str, Any]]:
    """Suggestions for admins: quotas mostly unused; MIG profiles idle in a pool while other
    profiles wait. Each opens a prefilled request."""
    out = []
    for row in quota_utilisation(period):
        if row["level"] != "namespace quota" or row["utilisation"] is None:
            continue
        if row["utilisation"] < unused_below and row["average_limit"] >= 1:
            team, namespace = row["owner"].split("/", 1)
            out.append(
                {
                    "kind": "unused quota",
                    "subject": row["owner"],
                    "text": f"{row['owner']} used {row['utilisation']:.0%} of its "
                    f"{row['average_limit']:g} {row['resource']} on average: lower the quota or "
                    "lend the queue's share to the cohort.",
                    "url": f"/quota/new/?team={team}&namespace={namespace}"
                    f"&resource=requests.{row['resource']}",
                }
            )
    waiting: dict[str, float] = defaultdict(float)
    for row in (
        _rollups(period, Sample.Kind.TEAM).values("resource").annotate(p=Sum("pending_seconds"))
    ):
        waiting[row["resource"]] = row["p"]
    for row in idle_capacity(period):
        others = [r for r, p in waiting.items() if p > 0 and r != row["resource"]]
        if (
            row["idle_share"] is not None
            and row["idle_share"] > idle_above
            and others
            and row["resource"].startswith("nvidia.com/mig-")
        ):
            out.append(
                {
                    "kind": "idle profile",
                    "subject": f"{row['pool']} {row['resource']}",
                    "text": f"{row['resource']} sat {row['idle_share']:.0%} idle in pool "
                    f"{row['pool']} while pods waited for {', '.join(sorted(others))}: change the "
                    "pool's MIG layout.",
                    "url": f"/changes/new/?pool={row['pool']}",
                }
            )
    return out


def queue_gpu_hours(period: Period) -> list[dict[str, Any]]:
    return gpu_hours(period, by="queue")


REPORTS = {
    "usage-over-time": usage_by_bucket,
    "gpu-hours": gpu_hours,
    "queue-gpu-hours": queue_gpu_hours,
    "quota-utilisation": quota_utilisation,
    "wait-times": wait_times,
    "borrowing": borrowing,
    "idle-capacity": idle_capacity,
}
TEAM_SCOPED = {"gpu-hours", "quota-utilisation", "usage-over-time"}
