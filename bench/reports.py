"""Benchmark: the usage reports over 90 days of daily rollups at 1,000 teams.

    python bench/reports.py [--teams 1000] [--days 90] [--queues 50] [--pools 10]

1. Fills a database of its own with daily rollups: per team two GPU resources, per
   ClusterQueue two flavors, per pool three resources, for every day; plus two admitted
   workloads per team and day (wait-time percentiles).
2. Runs every report the Usage page and the API serve for the whole period: GPU-hours by
   team and by resource, quota utilisation, wait times, borrowing, idle capacity, the
   suggestions and the charts of the six busiest teams (best of 3); then, once, every
   chart's data (usage-over-time for every team, as its CSV gives it).

3. A month's chargeback (costs/): the last 30 days priced (the pools A100-80GB, a price
   change in the middle, idle capacity shared by quota), every team's bill, best of 3.

Last line: ``report_s=… chargeback_s=…`` (all reports, one pass; the month's chargeback).
Goal: each under 1 s.
Also prints the rows and table sizes, and the storage of one day at the sampling settings.
"""

from __future__ import annotations

import argparse
import datetime as dt
import io
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings.test")
os.environ.setdefault("QM_EMBEDDED_DB_NAME", "quartermaster_bench")

from smoke import parse  # noqa: E402


def copy_rows(table: str, columns: list[str], rows: list[tuple[object, ...]]) -> None:
    from django.db import connection

    buffer = io.StringIO()
    for row in rows:
        buffer.write("\t".join(str(v) for v in row) + "\n")
    with (
        connection.cursor() as cursor,
        cursor.copy(f"COPY {table} ({', '.join(columns)}) FROM STDIN") as copy,
    ):
        copy.write(buffer.getvalue())


def fill(teams: int, days: int, queues: int, pools: int, now: dt.datetime) -> int:
    from django.core.management import call_command

    from usage.models import Rollup, WorkloadRecord

    call_command("migrate", verbosity=0)
    Rollup.objects.all().delete()
    WorkloadRecord.objects.all().delete()
    # Every row on a cluster, as the sampler writes them: the settings' one (each cluster key's
    # default), the cluster a single-cluster install has.
    cluster = Rollup._meta.get_field("cluster").get_default()
    columns = [
        "cluster_id",
        "period",
        "start",
        "kind",
        "owner",
        "scope",
        "flavor",
        "resource",
        "covered_seconds",
        "used_seconds",
        "requested_seconds",
        "borrowed_seconds",
        "lent_seconds",
        "capacity_seconds",
        "pending_seconds",
        "gpu_seconds",
        "peak_used",
    ]
    rows: list[tuple[object, ...]] = []
    day_s = 86400.0
    for d in range(days):
        start = now - dt.timedelta(days=days - d)
        for t in range(teams):
            for r, (resource, weight) in enumerate(
                (("nvidia.com/gpu", 1.0), ("nvidia.com/mig-3g.40gb", 0.5))
            ):
                used = (t + d + r) % 9
                rows.append(
                    (
                        cluster,
                        "day",
                        start,
                        "team",
                        f"team-{t:04d}",
                        f"team-{t:04d}",
                        "",
                        resource,
                        day_s,
                        used * day_s,
                        used * day_s,
                        0,
                        0,
                        8 * day_s,
                        (t % 3) * day_s,
                        used * weight * day_s,
                        used,
                    )
                )
        for q in range(queues):
            for flavor in ("h100", "a100-3g"):
                used = (q + d) % 20
                rows.append(
                    (
                        cluster,
                        "day",
                        start,
                        "queue",
                        f"cq-{q:03d}",
                        f"cohort-{q % 5}",
                        flavor,
                        "nvidia.com/gpu",
                        day_s,
                        used * day_s,
                        0,
                        max(0, used - 12) * day_s,
                        1.5 * day_s,
                        12 * day_s,
                        0,
                        used * day_s,
                        used,
                    )
                )
        for p in range(pools):
            for resource in ("nvidia.com/gpu", "nvidia.com/mig-3g.40gb", "nvidia.com/mig-1g.10gb"):
                rows.append(
                    (
                        cluster,
                        "day",
                        start,
                        "pool",
                        f"pool-{p}",
                        "",
                        "",
                        resource,
                        day_s,
                        300 * day_s,
                        0,
                        0,
                        0,
                        400 * day_s,
                        0,
                        300 * day_s,
                        320,
                    )
                )
    copy_rows(Rollup._meta.db_table, columns, rows)
    records = []
    for d in range(days):
        for t in range(teams):
            for j in range(2):
                created = now - dt.timedelta(days=days - d, minutes=t % 600 + j)
                wait = dt.timedelta(seconds=(t * 37 + d * 11 + j * 101) % 7200)
                records.append(
                    (
                        cluster,
                        f"team-{t:04d}",
                        f"job-{d}-{j}",
                        "",
                        f"team-{t:04d}",
                        f"cq-{t % queues:03d}",
                        created,
                        created + wait,
                        "\\N",
                        1.0,
                    )
                )
    copy_rows(
        WorkloadRecord._meta.db_table,
        [
            "cluster_id",
            "namespace",
            "name",
            "uid",
            "local_queue",
            "cluster_queue",
            "created_at",
            "admitted_at",
            "finished_at",
            "gpu_share",
        ],
        records,
    )
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    return len(rows) + len(records)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--teams", type=int, default=1000)
    parser.add_argument("--days", type=int, default=90)
    parser.add_argument("--queues", type=int, default=50)
    parser.add_argument("--pools", type=int, default=10)
    args = parse(parser, {"teams": 8, "days": 3, "queues": 3, "pools": 2})

    import django

    django.setup()
    from django.conf import settings
    from django.utils import timezone

    from usage import reports

    now = timezone.now().replace(hour=0, minute=0, second=0, microsecond=0)
    started = time.perf_counter()
    rows = fill(args.teams, args.days, args.queues, args.pools, now)
    print(
        f"filled {rows} rows ({args.days} days, {args.teams} teams) in "
        f"{time.perf_counter() - started:.1f} s",
        flush=True,
    )
    period = reports.Period(now - dt.timedelta(days=args.days), now)
    six = [row["team"] for row in reports.gpu_hours(period)[:6]]
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        timings = {}
        for name, run in (
            ("gpu-hours by team", lambda: reports.gpu_hours(period)),
            ("gpu-hours by resource", lambda: reports.gpu_hours(period, by="resource")),
            ("quota utilisation", lambda: reports.quota_utilisation(period)),
            ("wait times", lambda: reports.wait_times(period)),
            ("borrowing", lambda: reports.borrowing(period)),
            ("idle capacity", lambda: reports.idle_capacity(period)),
            ("suggestions", lambda: reports.insights(period)),
            ("charts of six teams", lambda: reports.usage_by_bucket(period, teams=six)),
        ):
            t1 = time.perf_counter()
            result = run()
            timings[name] = (time.perf_counter() - t1, len(result))
        best = min(best, time.perf_counter() - t0)
    for name, (seconds, count) in timings.items():
        print(f"  {name:<22} {seconds * 1000:7.1f} ms  {count} rows")
    t1 = time.perf_counter()
    count = len(reports.usage_by_bucket(period))
    print(
        f"  every chart's data (usage-over-time for every team, not in report_s) "
        f"{(time.perf_counter() - t1) * 1000:.1f} ms  {count} rows"
    )
    per_sample = args.teams * 2 + args.queues * 2 + args.pools * 3
    samples_per_day = 86400 // settings.QM_SAMPLE_SECONDS
    print(
        f"storage per day at these sizes: {per_sample * samples_per_day} samples "
        f"({settings.QM_SAMPLE_SECONDS} s apart), {per_sample * 24} hourly and {per_sample} "
        "daily rollups"
    )
    from django.db import connection

    from usage.models import Rollup

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_total_relation_size(%s)", [Rollup._meta.db_table])
        size = cursor.fetchone()[0]
    per_row = size / max(1, Rollup.objects.count())
    print(
        f"rollup table with indexes: {size / 2**20:.0f} MiB, {per_row:.0f} bytes a row; a day "
        f"costs {per_sample * samples_per_day * per_row / 2**20:.0f} MiB of samples and "
        f"{per_sample * 24 * per_row / 2**20:.1f} MiB of hourly rollups"
    )
    charge_s, teams_billed = chargeback(now, args.pools)
    print(f"  a month's chargeback   {charge_s * 1000:7.1f} ms  {teams_billed} teams billed")
    print(f"report_s={best:.3f} chargeback_s={charge_s:.3f}")
    return 0


def chargeback(now: dt.datetime, pools: int) -> tuple[float, int]:
    """The last 30 days' chargeback of every team (best of 3), the pools priced as A100-80GB
    nodes with the price changed halfway, idle capacity shared by quota."""
    from decimal import Decimal

    from costs import selectors
    from costs.models import Price
    from costs.services import save_price, set_cost_policy
    from fleet.models import NodePool
    from portal.audit.record import SYSTEM
    from usage.models import SamplingState

    NodePool.objects.all().delete()
    Price.objects.all().delete()
    product = {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"}
    NodePool.objects.bulk_create(
        NodePool(name=f"pool-{p}", node_selector={**product, "pool": str(p)}) for p in range(pools)
    )
    start, end = (now - dt.timedelta(days=30)).date(), now.date()
    for since, per_hour in (
        (start - dt.timedelta(days=400), "2.40"),
        (start + dt.timedelta(days=15), "2.55"),
    ):
        save_price(
            actor=SYSTEM,
            price=Price(gpu_model="A100-80GB", per_hour=Decimal(per_hour), effective_from=since),
            source="cli",
        )
    set_cost_policy(actor=SYSTEM, currency="USD", idle_sharing="quota", source="cli")
    SamplingState.objects.all().delete()
    SamplingState.objects.create(rolled_up_to=now)  # every day of the history rolled up
    best, billed = float("inf"), 0
    for _ in range(3):
        t0 = time.perf_counter()
        billed = len(selectors.chargeback(start, end).teams)
        best = min(best, time.perf_counter() - t0)
    return best, billed


if __name__ == "__main__":
    sys.exit(main())
