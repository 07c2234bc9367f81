"""Reports over the usage rollups: GPU-hours, quota utilisation, wait times, borrowing and
lending, idle capacity, and suggestions. Each report is a list of rows (the same for the
page, the API and CSV).

Every report takes ``cluster``: one cluster's series, or (None) every cluster's. A team is
global, so its use is summed over its namespaces on every cluster, each cluster's part in
``clusters``; a namespace, queue or pool belongs to one cluster, so its rows name it
(``cluster``) and two of the same name on two clusters are two rows, never one sum."""

from __future__ import annotations

import datetime as dt
import math
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from django.db import connection
from django.db.models import Min, Q, Sum
from django.db.models.functions import Trunc
from django.utils import timezone

from cluster.models import Cluster
from tenants.models import Namespace, Team
from usage.models import DRA_GPUS, Rollup, Sample, SamplingState, WorkloadRecord

HOUR = 3600.0
DAY = dt.timedelta(days=1)


@dataclass(frozen=True)
class Period:
    """[start, end). With daily buckets, ``partial_from`` (a midnight) is where the daily
    rollups stop: from there on, the hourly ones rolled up so far (to ``rolled_up_to``)
    count, so today is in, as far as it goes."""

    start: dt.datetime
    end: dt.datetime
    partial_from: dt.datetime | None = None
    rolled_up_to: dt.datetime | None = None

    @property
    def granularity(self) -> str:
        return "day" if (self.end - self.start) > DAY else "hour"

    @property
    def adjective(self) -> str:
        return {"day": "daily", "hour": "hourly"}[self.granularity]

    @property
    def step(self) -> dt.timedelta:
        return DAY if self.granularity == "day" else dt.timedelta(hours=1)

    def bucket(self, time: dt.datetime) -> dt.datetime:
        """The start of the chart bucket ``time`` falls in (a day or an hour, UTC)."""
        time = time.astimezone(dt.UTC).replace(minute=0, second=0, microsecond=0)
        return time.replace(hour=0) if self.granularity == "day" else time

    def buckets(self) -> list[dt.datetime]:
        """Every bucket of the period, those without data included (a chart's x axis)."""
        out, time = [], self.bucket(self.start)
        while time < self.end:
            out.append(time)
            time += self.step
        return out

    def is_partial(self, bucket: dt.datetime) -> bool:
        """A day the daily rollups do not cover yet (today; yesterday, just after midnight)."""
        return self.partial_from is not None and bucket >= self.partial_from

    @classmethod
    def last(
        cls, days: int, now: dt.datetime | None = None, rolled_up_to: dt.datetime | None = None
    ) -> Period:
        """The last ``days``: 1 is the last 24 whole hours, hourly; more are that many days,
        daily, the last one today so far (the hours rolled up up to ``rolled_up_to``; without
        it, none of today's)."""
        now = now or timezone.now()
        hour = now.replace(minute=0, second=0, microsecond=0)
        if days < 2:
            return cls(hour - dt.timedelta(days=days), hour)
        today = hour.replace(hour=0)
        upto = min(rolled_up_to or today, today + DAY)
        partial = upto.astimezone(dt.UTC).replace(hour=0, minute=0, second=0, microsecond=0)
        return cls(today - dt.timedelta(days=days - 1), now, partial, upto)


def last_days(days: int, now: dt.datetime | None = None) -> Period:
    """``Period.last`` up to the hours rolled up so far (today included, as far as it goes)."""
    upto = SamplingState.objects.values_list("rolled_up_to", flat=True).first()
    return Period.last(days, now=now, rolled_up_to=upto)


def _rollups(period: Period, kind: str, cluster: Cluster | None = None) -> Any:
    rows = Rollup.objects.filter(kind=kind)
    if cluster is not None:
        rows = rows.filter(cluster=cluster)
    if period.partial_from is None:
        return rows.filter(period=period.granularity, start__gte=period.start, start__lt=period.end)
    return rows.filter(
        Q(period=Rollup.Period.DAY, start__gte=period.start, start__lt=period.partial_from)
        | Q(period=Rollup.Period.HOUR, start__gte=period.partial_from, start__lt=period.end)
    )


def data_start(period: Period, *, cluster: Cluster | None = None) -> dt.datetime | None:
    """The first bucket with any history in the period (None: no history in it)."""
    first = _rollups(period, Sample.Kind.TEAM, cluster).aggregate(first=Min("start"))["first"]
    return period.bucket(first) if first else None


def _scoped(rows: Any, teams: Iterable[str] | None) -> Any:
    return rows if teams is None else rows.filter(owner__in=list(teams))


def gpu_hours(
    period: Period,
    *,
    by: str = "team",
    teams: Iterable[str] | None = None,
    cluster: Cluster | None = None,
) -> list[dict[str, Any]]:
    """GPU-hours (MIG profiles weighted by their share of a GPU) and device-hours per team,
    namespace, resource, or ClusterQueue flavor and resource (``by="queue"``: what the
    queues admitted, not team data, so never scoped). A team's (and a team's resource's)
    hours are summed over the clusters, each one's part in ``clusters``; a namespace's and
    a queue's rows name their cluster."""
    if by == "queue":
        kind, fields = Sample.Kind.QUEUE, ["owner", "flavor", "resource"]
        names = {"owner": "cluster_queue", "flavor": "flavor", "resource": "resource"}
        rollups = _rollups(period, kind, cluster)
    else:
        kind = Sample.Kind.TEAM
        fields = {
            "team": ["owner"],
            "namespace": ["owner", "scope"],
            "resource": ["owner", "resource"],
        }[by]
        names = {"owner": "team", "scope": "namespace", "resource": "resource"}
        rollups = _scoped(_rollups(period, kind, cluster), teams)
    rows = (
        rollups.values(*fields, "cluster__name")
        .annotate(gpu=Sum("gpu_seconds"), devices=Sum("used_seconds"))
        .order_by(*fields, "cluster__name")
    )
    hours = [
        {
            "cluster": row["cluster__name"],
            **{names[f]: row[f] for f in fields},
            "gpu_hours": round(row["gpu"] / HOUR, 3),
            "device_hours": round(row["devices"] / HOUR, 3),
        }
        for row in rows
    ]
    return _summed_over_clusters(hours) if by in ("team", "resource") else hours


def _summed_over_clusters(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows of one team's use per cluster (in order, a team's clusters together) summed into
    one row per team (and resource), each cluster's part kept in ``clusters``."""
    out: dict[tuple[Any, ...], dict[str, Any]] = {}
    for row in rows:
        part = {k: row[k] for k in ("cluster", "gpu_hours", "device_hours")}
        key = tuple(v for k, v in row.items() if k not in part)
        if key not in out:
            out[key] = {k: v for k, v in row.items() if k not in part}
            out[key].update(gpu_hours=0.0, device_hours=0.0, clusters=[])
        total = out[key]
        total["gpu_hours"] = round(total["gpu_hours"] + part["gpu_hours"], 3)
        total["device_hours"] = round(total["device_hours"] + part["device_hours"], 3)
        total["clusters"].append(part)
    return list(out.values())


def _averages(row: dict[str, Any]) -> dict[str, Any]:
    return {
        "average_used": round(row["used"] / row["covered"], 3) if row["covered"] else 0,
        "average_limit": round(row["cap"] / row["covered"], 3) if row["covered"] else 0,
        "utilisation": round(row["used"] / row["cap"], 4) if row["cap"] else None,
    }


def quota_utilisation(
    period: Period, *, teams: Iterable[str] | None = None, cluster: Cluster | None = None
) -> list[dict[str, Any]]:
    """Average use against the namespace quota (requests.<resource>) and, per ClusterQueue,
    against its nominal quota; each row on its cluster."""
    sums = {
        "used": Sum("used_seconds"),
        "cap": Sum("capacity_seconds"),
        "covered": Sum("covered_seconds"),
    }
    team_rows = (
        _scoped(_rollups(period, Sample.Kind.TEAM, cluster), teams)
        .exclude(capacity_seconds=0)
        .values("owner", "scope", "resource", "cluster__name")
        .annotate(**sums)
        .order_by("owner", "scope", "resource", "cluster__name")
    )
    out = [
        {
            "cluster": row["cluster__name"],
            "level": "namespace quota",
            "owner": f"{row['owner']}/{row['scope']}",
            "resource": row["resource"],
            **_averages(row),
        }
        for row in team_rows
    ]
    if teams is None:
        queue_rows = (
            _rollups(period, Sample.Kind.QUEUE, cluster)
            .values("owner", "flavor", "resource", "cluster__name")
            .annotate(**sums)
            .order_by("owner", "flavor", "resource", "cluster__name")
        )
        out += [
            {
                "cluster": row["cluster__name"],
                "level": "ClusterQueue nominal",
                "owner": f"{row['owner']} ({row['flavor']})",
                "resource": row["resource"],
                **_averages(row),
            }
            for row in queue_rows
        ]
    return out


def wait_times(
    period: Period, *, teams: Iterable[str] | None = None, cluster: Cluster | None = None
) -> list[dict[str, Any]]:
    """Per ClusterQueue (of each cluster): workloads admitted in the period (with ``teams``:
    those of the teams' namespaces) and their wait at the 50th, 90th and 99th percentile,
    in seconds (PostgreSQL's percentile_cont). The wait is admitted - queued: from the
    creation, or from the requeue after an eviction to the admission that followed (never
    the time a workload ran before Kueue evicted it)."""
    scoped, params = "", list[Any]([period.start, period.end])
    if cluster is not None:
        scoped += " AND w.cluster_id = %s"
        params.append(cluster.pk)
    if teams is not None:
        scoped += f""" AND (w.cluster_id, w.namespace) IN (
            SELECT ns.cluster_id, ns.name FROM {Namespace._meta.db_table} ns
            JOIN {Team._meta.db_table} t ON t.id = ns.team_id
            WHERE t.slug = ANY(%s))"""
        params.append(list(teams))
    sql = f"""
        SELECT c.name, w.cluster_queue, count(*),
               percentile_cont(ARRAY[0.5, 0.9, 0.99]) WITHIN GROUP (
                   ORDER BY extract(epoch FROM w.admitted_at
                                               - coalesce(w.queued_at, w.created_at)))
        FROM {WorkloadRecord._meta.db_table} w
        JOIN {Cluster._meta.db_table} c ON c.id = w.cluster_id
        WHERE w.admitted_at >= %s AND w.admitted_at < %s {scoped}
        GROUP BY w.cluster_queue, c.name ORDER BY w.cluster_queue, c.name
    """
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    return [
        {
            "cluster": cluster_name,
            "cluster_queue": queue or "(no queue)",
            "admitted": count,
            "p50_s": round(p[0], 1),
            "p90_s": round(p[1], 1),
            "p99_s": round(p[2], 1),
        }
        for cluster_name, queue, count, p in rows
    ]


def borrowing(period: Period, *, cluster: Cluster | None = None) -> list[dict[str, Any]]:
    """Per ClusterQueue (of each cluster), flavor and resource: average borrowed from the
    cohort and lent to it (lent is estimated: Kueue reports who borrows, not who lends).
    Only while in a cohort: a queue in none neither borrows nor lends (as the Queues page
    says), so the hours it spent in none are no row of this report."""
    rows = (
        _rollups(period, Sample.Kind.QUEUE, cluster)
        .exclude(scope="")
        .values("scope", "owner", "flavor", "resource", "cluster__name")
        .annotate(
            b=Sum("borrowed_seconds"), lent=Sum("lent_seconds"), covered=Sum("covered_seconds")
        )
        .order_by("scope", "owner", "flavor", "resource", "cluster__name")
    )
    return [
        {
            "cluster": row["cluster__name"],
            "cohort": row["scope"],
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


def idle_capacity(period: Period, *, cluster: Cluster | None = None) -> list[dict[str, Any]]:
    """Per pool (of each cluster) and GPU resource (whole GPUs and each MIG profile):
    average allocatable, allocated and idle, and idle device-hours; and of the allocatable
    and allocated, the part published and held through DRA (the rest: the device plugin's)."""
    per_flavor = (
        _rollups(period, Sample.Kind.POOL, cluster)
        .values("owner", "resource", "cluster__name", "flavor")
        .annotate(
            used=Sum("used_seconds"), cap=Sum("capacity_seconds"), covered=Sum("covered_seconds")
        )
        .order_by("owner", "resource", "cluster__name", "flavor")
    )
    # A pool serving GPUs both ways has a row per way (flavor: blank for the device plugin,
    # DRA_GPUS), sampled at the same times: the hours covered are one way's, not their sum.
    rows: dict[tuple[str, str, str], dict[str, Any]] = {}
    for part in per_flavor:
        key = (part["owner"], part["resource"], part["cluster__name"])
        row = rows.setdefault(key, {"used": 0, "cap": 0, "covered": 0, "dra_used": 0, "dra_cap": 0})
        row["used"] += part["used"] or 0
        row["cap"] += part["cap"] or 0
        row["covered"] = max(row["covered"], part["covered"] or 0)
        if part["flavor"] == DRA_GPUS:
            row["dra_used"] += part["used"] or 0
            row["dra_cap"] += part["cap"] or 0
    out = []
    for (pool, resource, cluster_name), row in rows.items():
        covered = row["covered"]
        out.append(
            {
                "cluster": cluster_name,
                "pool": pool,
                "resource": resource,
                "average_allocatable": round(row["cap"] / covered, 3) if covered else 0,
                "average_allocated": round(row["used"] / covered, 3) if covered else 0,
                "idle_share": round(1 - row["used"] / row["cap"], 4) if row["cap"] else None,
                "idle_device_hours": round((row["cap"] - row["used"]) / HOUR, 3),
                "average_allocatable_by_dra": round(row["dra_cap"] / covered, 3) if covered else 0,
                "average_allocated_by_dra": round(row["dra_used"] / covered, 3) if covered else 0,
            }
        )
    return out


def usage_by_bucket(
    period: Period,
    *,
    teams: Iterable[str] | None = None,
    resource: str = "",
    cluster: Cluster | None = None,
) -> list[dict[str, Any]]:
    """The data behind the usage charts: per team, bucket and resource, the average in use
    and the quota (summed over the team's namespaces, on every cluster or on ``cluster``),
    the hours the bucket covers and whether it is the day in progress. One query, summed in
    PostgreSQL (today's hours into one day); buckets without data have no row."""
    teams = None if teams is None else list(teams)
    if teams == []:
        return []  # no team: nothing to ask (an empty IN compiles to no SQL at all)
    rows = _scoped(_rollups(period, Sample.Kind.TEAM, cluster), teams)
    if resource:
        rows = rows.filter(resource=resource)
    # Per namespace and way (flavor: the device plugin's, or a DRA device class): each way
    # covers the same hours, so the team's bucket covers the best-covered one's, not a sum.
    per_namespace = (
        rows.annotate(bucket=Trunc("start", period.granularity, tzinfo=dt.UTC))
        .values("cluster_id", "owner", "scope", "flavor", "resource", "bucket")
        .annotate(used=Sum("used_seconds"), cap=Sum("capacity_seconds"), cov=Sum("covered_seconds"))
        .order_by()
    )
    inner, params = per_namespace.query.sql_with_params()
    # Every namespace of a team, on every cluster, is sampled at the same times: the bucket
    # covers what the best-covered one does.
    sql = f"""SELECT owner, bucket, resource, sum(used), sum(cap), max(cov)
        FROM ({inner}) AS per_namespace GROUP BY owner, bucket, resource
        ORDER BY owner, bucket, resource"""
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        # The bucket is a UTC wall time (date_trunc of ``start AT TIME ZONE 'UTC'``).
        found = [(t, b.replace(tzinfo=dt.UTC), *rest) for t, b, *rest in cursor.fetchall()]
    return [
        {
            "team": team,
            "start": start.isoformat(),
            "resource": name,
            "average_used": round(used / seconds, 3) if seconds else 0,
            "quota": round(cap / seconds, 3) if seconds else 0,
            "covered_hours": round(seconds / HOUR, 2),
            "partial": period.is_partial(start),
        }
        for team, start, name, used, cap, seconds in found
    ]


@dataclass(frozen=True)
class Suggestions:
    """What the page suggests, and a sentence saying what was checked (shown when it
    suggests nothing)."""

    items: list[dict[str, Any]]
    checked: str


def _span(period: Period, since: dt.datetime | None) -> str:
    """The part of the period with history rolled up, in buckets: "14 days" (or "5 hours")."""
    start = max(period.start, since) if since else period.start
    end = min(period.end, period.rolled_up_to) if period.rolled_up_to else period.end
    count = max(1, math.ceil((end - start) / period.step))
    return _plural(count, "day" if period.granularity == "day" else "hour")


def _plural(count: int, word: str) -> str:
    return f"{count:,} {word}{'s' if count != 1 else ''}"


def _on(row: dict[str, Any], several: bool) -> str:
    """ "on gpu-east: " before a suggestion when the rows it was drawn from span clusters."""
    return f"on {row['cluster']}: " if several else ""


def _unused_quotas(
    period: Period, teams: Iterable[str] | None, below: float, cluster: Cluster | None
) -> tuple[list[dict[str, Any]], int]:
    out, checked = [], 0
    rows = [
        r
        for r in quota_utilisation(period, teams=teams, cluster=cluster)
        if r["level"] == "namespace quota" and r["utilisation"] is not None
    ]
    several = len({r["cluster"] for r in rows}) > 1
    for row in rows:
        checked += 1
        if row["utilisation"] < below and row["average_limit"] >= 1:
            team, namespace = row["owner"].split("/", 1)
            out.append(
                {
                    "kind": "unused quota",
                    "cluster": row["cluster"],
                    "subject": row["owner"],
                    "text": f"{_on(row, several)}{row['owner']} used {row['utilisation']:.0%} of "
                    f"its {row['average_limit']:g} {row['resource']} on average: lower the quota "
                    "or lend the queue's share to the cohort.",
                    "url": "/quota/new/?"
                    + urlencode(
                        {
                            "team": team,
                            "namespace": namespace,
                            "resource": f"requests.{row['resource']}",
                            "cluster": row["cluster"],
                        }
                    ),
                }
            )
    return out, checked


def _idle_profiles(
    period: Period, above: float, cluster: Cluster | None
) -> tuple[list[dict[str, Any]], int, int]:
    """MIG profiles idle in a pool while pods of the same cluster waited for another."""
    waiting: dict[tuple[str, str], float] = defaultdict(float)
    for row in (
        _rollups(period, Sample.Kind.TEAM, cluster)
        .values("cluster__name", "resource")
        .annotate(p=Sum("pending_seconds"))
    ):
        waiting[(row["cluster__name"], row["resource"])] = row["p"]
    out, profiles, pools = [], 0, set()
    rows = [
        r
        for r in idle_capacity(period, cluster=cluster)
        if r["resource"].startswith("nvidia.com/mig-") and r["idle_share"] is not None
    ]
    several = len({r["cluster"] for r in rows}) > 1
    for row in rows:
        profiles += 1
        pools.add((row["cluster"], row["pool"]))
        others = [
            r
            for (c, r), p in waiting.items()
            if c == row["cluster"] and p > 0 and r != row["resource"]
        ]
        if row["idle_share"] > above and others:
            out.append(
                {
                    "kind": "idle profile",
                    "cluster": row["cluster"],
                    "subject": f"{row['pool']} {row['resource']}",
                    "text": f"{_on(row, several)}{row['resource']} sat {row['idle_share']:.0%} "
                    f"idle in pool {row['pool']} while pods waited for "
                    f"{', '.join(sorted(others))}: change the pool's MIG layout.",
                    "url": "/changes/new/?"
                    + urlencode({"pool": row["pool"], "cluster": row["cluster"]}),
                }
            )
    return out, profiles, len(pools)


def suggestions(
    period: Period,
    *,
    teams: Iterable[str] | None = None,
    since: dt.datetime | None = None,
    unused_below: float = 0.3,
    idle_above: float = 0.5,
    cluster: Cluster | None = None,
) -> Suggestions:
    """Quotas mostly unused (the teams' own, or every team's) and, for everyone's view
    (``teams`` None), MIG profiles idle in a pool while other profiles wait on the same
    cluster. Each opens a prefilled request. ``since``: where the history begins, for the
    sentence; ``cluster``: one cluster's (None: every cluster's)."""
    items, quotas = _unused_quotas(period, teams, unused_below, cluster)
    checks = [
        f"{_plural(quotas, 'namespace quota')} over {_span(period, since)}: "
        + f"none used under {unused_below:.0%} of its limit on average"
    ]
    if teams is None:
        idle, profiles, pools = _idle_profiles(period, idle_above, cluster)
        items += idle
        checks.append(
            f"{_plural(profiles, 'MIG profile')} in {_plural(pools, 'pool')}: "
            + f"none sat over {idle_above:.0%} idle while pods waited for another profile"
        )
    if quotas == 0 and (teams is not None or profiles == 0):
        what = "no quota" if teams is not None else "no quota and no MIG profile in a pool"
        checked = f"Nothing to check: {what} had samples in this period."
    else:
        checked = "Checked " + "; checked ".join(checks) + "."
    return Suggestions(items, checked)


def insights(
    period: Period,
    *,
    unused_below: float = 0.3,
    idle_above: float = 0.5,
    cluster: Cluster | None = None,
) -> list[dict[str, Any]]:
    """Every team's suggestions (see ``suggestions``)."""
    return suggestions(
        period, unused_below=unused_below, idle_above=idle_above, cluster=cluster
    ).items


def queue_gpu_hours(period: Period, *, cluster: Cluster | None = None) -> list[dict[str, Any]]:
    return gpu_hours(period, by="queue", cluster=cluster)


REPORTS = {
    "usage-over-time": usage_by_bucket,
    "gpu-hours": gpu_hours,
    "queue-gpu-hours": queue_gpu_hours,
    "quota-utilisation": quota_utilisation,
    "wait-times": wait_times,
    "borrowing": borrowing,
    "idle-capacity": idle_capacity,
}
TEAM_SCOPED = {"gpu-hours", "quota-utilisation", "usage-over-time", "wait-times"}
# Reports whose rows name a resource (``?resource=`` keeps one).
RESOURCE_COLUMN = {
    "usage-over-time",
    "queue-gpu-hours",
    "quota-utilisation",
    "borrowing",
    "idle-capacity",
}
