"""The Usage page, its CSV and the reports API run a fixed number of SQL queries whatever
the amount of history: measured at two sizes (a few teams, then many more teams, each with
its namespace, daily and hourly rollups, a queue, a pool and workloads) and compared."""

from __future__ import annotations

import datetime as dt

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from cluster.scope import settings_cluster_id
from tenants.models import Membership, Namespace, Team
from tests.unit.portal.test_page_queries import count
from usage.models import Rollup, SamplingState, WorkloadRecord

pytestmark = pytest.mark.django_db

PAGES = [
    ("/reports/?days=30", "lead-a"),
    ("/reports/?days=30&team=team-a", "lead-a"),
    ("/reports/?days=30", "admin"),
    ("/reports/?days=1", "admin"),
    ("/reports/?days=7&team=grown-0", "admin"),
    ("/reports/usage-over-time.csv?days=30", "lead-a"),
    ("/api/v1/reports/usage-over-time/?days=30&resource=nvidia.com/gpu", "lead-a"),
    ("/api/v1/reports/wait-times/?days=30", "lead-a"),
]


def rollups(
    kind: str, owner: str, resource: str, today: dt.datetime, cluster_id: int, **extra: str
) -> list[Rollup]:
    """Two weeks of days and this morning's hours, 4 of 8 in use, on the cluster given (a
    row built without one asks the database for the settings' cluster)."""
    rows = []
    starts = [("day", today - dt.timedelta(days=d), 86400) for d in range(1, 15)]
    starts += [("hour", today + dt.timedelta(hours=h), 3600) for h in range(3)]
    for period, start, seconds in starts:
        rows.append(
            Rollup(
                cluster_id=cluster_id,
                period=period,
                start=start,
                kind=kind,
                owner=owner,
                resource=resource,
                covered_seconds=seconds,
                used_seconds=4 * seconds,
                gpu_seconds=4 * seconds,
                capacity_seconds=8 * seconds,
                **extra,
            )
        )
    return rows


def grow(size: int, start: int) -> None:
    """``size`` more teams (lead-a leads each) with their usage history."""
    today = timezone.now().replace(hour=0, minute=0, second=0, microsecond=0)
    lead = User.objects.get(username="lead-a")
    cluster = settings_cluster_id()
    rows: list[Rollup] = []
    for index in range(start, start + size):
        name = f"grown-{index}"
        team = Team.objects.create(slug=name, name=f"Grown {index}")
        Membership.objects.create(user=lead, team=team, role="lead")
        Namespace.objects.create(name=name, team=team)
        for resource in ("nvidia.com/gpu", "nvidia.com/mig-3g.40gb"):
            rows += rollups("team", name, resource, today, cluster, scope=name)
        rows += rollups("queue", f"cq-{name}", "nvidia.com/gpu", today, cluster, flavor="h100")
        rows += rollups("pool", f"pool-{name}", "nvidia.com/mig-3g.40gb", today, cluster)
        created = today - dt.timedelta(days=2)
        WorkloadRecord.objects.create(
            namespace=name,
            name=f"job-{index}",
            cluster_queue=f"cq-{name}",
            created_at=created,
            admitted_at=created + dt.timedelta(seconds=60 + index),
        )
    Rollup.objects.bulk_create(rows)
    SamplingState.objects.update_or_create(
        pk=SamplingState.objects.values_list("pk", flat=True).first(),
        defaults={"rolled_up_to": today + dt.timedelta(hours=3)},
    )


def test_usage_query_counts_do_not_grow_with_history(demo: None) -> None:
    grow(3, 0)
    small = {(page, user): count(page, user) for page, user in PAGES}
    grow(40, 3)
    shown = {
        "/reports/?days=30": "grown-42",
        "/reports/usage-over-time.csv?days=30": "grown-42",
        "/api/v1/reports/wait-times/?days=30": "cq-grown-42",
    }
    large = {
        (page, user): count(page, user, shown.get(page.split("&")[0], "")) for page, user in PAGES
    }
    assert large == small
    assert max(small.values()) <= 24, small
