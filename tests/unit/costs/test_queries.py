"""The costs pages, the invoice's CSV and the API run a fixed number of SQL queries whatever
the amount of history: counted with a few teams and pools, then with many more."""

from __future__ import annotations

import functools
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from cluster.scope import settings_cluster_id
from fleet.models import NodePool
from tenants.models import Membership, Team
from tests.unit.costs.history import A100, DAYS, MIG_1G, dra, made, rollup
from usage.models import Rollup

pytestmark = pytest.mark.django_db

PAGES = [
    ("/costs/?month=2026-11", "padmin"),
    ("/costs/?month=2026-11", "alice"),
    ("/costs/invoices/team-a/2026-11/", "alice"),
    ("/costs/invoices/team-a/2026-11.csv", "alice"),
    ("/api/v1/costs/invoices/team-a/2026-11/", "alice"),
    ("/api/v1/costs/summary/?month=2026-11", "padmin"),
    ("/costs/panel/team-a/", "alice"),
]


def grow(start: int, size: int) -> None:
    """``size`` more teams (alice leads each) using slices of as many more pools each day."""
    lead = User.objects.get(username="alice")
    row = functools.partial(rollup, cluster_id=settings_cluster_id())
    rows = []
    for index in range(start, start + size):
        name = f"grown-{index}"
        Membership.objects.create(
            user=lead, team=Team.objects.create(slug=name, name=name), role="lead"
        )
        NodePool.objects.create(
            name=f"pool-{index}", node_selector={"nvidia.com/gpu.product": A100}
        )
        for day in DAYS:
            rows.append(row(day, "team", name, MIG_1G, 2, 7, name, 1 / 7))
            rows.append(row(day, "pool", f"pool-{index}", MIG_1G, 2, 7, weight=1 / 7))
            rows.append(row(day, "queue", f"cq-{index}", MIG_1G, 2, 7))
    Rollup.objects.bulk_create(rows)


def count(page: str, user: str) -> int:
    client = Client()
    client.force_login(User.objects.get(username=user))
    with CaptureQueriesContext(connection) as queries:
        response = client.get(page)
    assert response.status_code == 200, (page, user)
    return len(queries)


def test_query_counts_do_not_grow_with_history(team_a_admin: Any, platform_admin: Any) -> None:
    made()
    dra()  # GPUs by DRA priced beside the device plugin's, in the same queries
    grow(0, 2)
    small = {(page, user): count(page, user) for page, user in PAGES}
    grow(2, 30)
    large = {(page, user): count(page, user) for page, user in PAGES}
    assert large == small
    client = Client()
    client.force_login(team_a_admin)
    assert "grown-31" in client.get("/costs/?month=2026-11").content.decode()
