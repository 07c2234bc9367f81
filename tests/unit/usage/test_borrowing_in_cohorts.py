"""The "Borrowing and lending in cohorts" report agrees with the Queues page: a ClusterQueue
in no cohort neither borrows nor lends, on the page, in its CSV and in the API. The demo
has cq-infer alone (the second demo cluster holds it in no cohort); its backfilled history
said it lent."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import Client

from queues.models import ClusterQueue
from queues.services import save_cluster_queue
from usage.models import Rollup

pytestmark = pytest.mark.django_db


@pytest.fixture
def infer_alone(demo: None) -> None:
    """cq-infer taken out of its cohort (through the queues' service), then the demo's
    usage history backfilled as ``dev.py run`` does."""
    cq = ClusterQueue.objects.get(name="cq-infer")
    cq.cohort = None
    save_cluster_queue(actor=User.objects.get(username="admin"), cluster_queue=cq, source="ui")
    call_command("backfill_usage", "--days", "2")


def test_the_backfill_has_a_queue_in_no_cohort_neither_borrow_nor_lend(infer_alone: None) -> None:
    alone = Rollup.objects.filter(kind="queue", owner="cq-infer")
    assert alone.exists()
    assert set(alone.values_list("scope", "borrowed_seconds", "lent_seconds")) == {("", 0, 0)}
    # the queues of the cohort still do
    assert Rollup.objects.filter(kind="queue", owner="cq-train", lent_seconds__gt=0).exists()


def test_the_report_lists_only_queues_in_a_cohort_on_every_channel(infer_alone: None) -> None:
    # a queue in no cohort, whatever its rows say (history written before this rule)
    Rollup.objects.filter(kind="queue", owner="cq-infer").update(
        lent_seconds=600, borrowed_seconds=60
    )
    client = Client()
    client.force_login(User.objects.get(username="admin"))
    page = client.get("/reports/?days=7").content.decode()
    table = page[page.index('id="borrow-title"') : page.index('id="idle-title"')]
    assert "cq-train" in table and "cq-dev" in table
    assert "cq-infer" not in table
    assert "A ClusterQueue in no cohort neither borrows nor lends" in table
    csv = client.get("/reports/borrowing.csv?days=7").content.decode()
    assert "cq-train" in csv and "cq-infer" not in csv and "(none)" not in csv
    api = client.get("/api/v1/reports/borrowing/?days=7").json()
    assert {r["cluster_queue"] for r in api} == {"cq-train", "cq-dev"}
    assert {r["cohort"] for r in api} == {"ai-platform"}
