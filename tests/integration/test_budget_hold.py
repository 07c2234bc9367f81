"""A spent budget with enforcement on, on the demo cluster: the team's LocalQueue is sent
``stopPolicy: Hold`` through the loop (intent, render, apply), so Kueue admits nothing new
there while the workloads it admitted before keep running, and the team is told; an
extension granted lifts the hold and the waiting work is admitted. Enforcement off: nothing
is held."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

import pytest
from django.contrib.auth.models import User

from budgets.models import Budget
from budgets.services import decide_budget_extension, request_budget_extension, save_budget
from kube import Gateway, ObjectRef
from loop.apply import apply_desired_state
from portal.models import Notification
from tenants.models import Team
from tests.support import wait_for
from usage.models import Rollup, SamplingState

pytestmark = pytest.mark.django_db

NOW = dt.datetime(2026, 12, 10, tzinfo=dt.UTC)
KUEUE = "kueue.x-k8s.io/v1beta2"


def spent(slug: str, hours: float) -> None:
    """``hours`` GPU-hours of ``slug`` on December's first day, rolled up to the 10th."""
    Rollup.objects.create(
        period="day",
        start=dt.datetime(2026, 12, 1, tzinfo=dt.UTC),
        kind="team",
        owner=slug,
        resource="nvidia.com/gpu",
        covered_seconds=86400,
        gpu_seconds=hours * 3600,
    )
    SamplingState.objects.update_or_create(pk=1, defaults={"rolled_up_to": NOW})


def stop_policy(gateway: Gateway, namespace: str, name: str) -> str:
    lq = gateway.get(ObjectRef(KUEUE, "LocalQueue", name, namespace))
    return str(lq["spec"].get("stopPolicy", "None"))


def submit(gateway: Gateway, name: str) -> None:
    """A small workload in team-a's queue (one 3g.40gb slice: cq-train has room for it)."""
    container = {
        "name": "main",
        "image": "trainer:latest",
        "resources": {"requests": {"nvidia.com/mig-3g.40gb": "1"}},
    }
    gateway.apply(
        {
            "apiVersion": KUEUE,
            "kind": "Workload",
            "metadata": {"name": name, "namespace": "team-a"},
            "spec": {
                "queueName": "team-a-train",
                "podSets": [
                    {"name": "main", "count": 1, "template": {"spec": {"containers": [container]}}}
                ],
            },
        }
    )


def conditions(gateway: Gateway, name: str) -> dict[str, Any]:
    workload = gateway.get(ObjectRef(KUEUE, "Workload", name, "team-a"))
    return {c["type"]: c for c in (workload.get("status") or {}).get("conditions") or []}


def admitted(gateway: Gateway) -> set[str]:
    return {
        w["metadata"]["name"]
        for w in gateway.list(KUEUE, "Workload", namespace="team-a")
        if any(
            c["type"] == "Admitted" and c["status"] == "True"
            for c in (w.get("status") or {}).get("conditions") or []
        )
    }


def test_a_spent_enforced_budget_holds_new_work_until_an_extension_is_granted(
    portal_cluster: Gateway, django_capture_on_commit_callbacks: Any
) -> None:
    running = admitted(portal_cluster)
    assert running  # the seed's team-a workloads run
    admin, lead = User.objects.get(username="admin"), User.objects.get(username="lead-a")
    team = Team.objects.get(slug="team-a")
    spent("team-a", 120)
    budget = Budget.objects.get(team=team)  # the demo's, not enforced: nothing held
    budget.amount, budget.enforce = Decimal(100), True
    with django_capture_on_commit_callbacks(execute=True):
        save_budget(actor=admin, budget=budget, source="web", now=NOW)
    apply_desired_state(gateway=portal_cluster)
    assert stop_policy(portal_cluster, "team-a", "team-a-train") == "Hold"
    assert stop_policy(portal_cluster, "team-b", "team-b-train") == "None"

    submit(portal_cluster, "after-the-budget")
    held = wait_for(
        lambda: conditions(portal_cluster, "after-the-budget").get("QuotaReserved"),
        timeout=15,
        what="the new workload looked at",
    )
    assert held["status"] == "False"
    assert held["message"] == "LocalQueue team-a-train is inactive"
    assert admitted(portal_cluster) == running  # running work untouched
    told = Notification.objects.get(user__username="member-a", event="budget.held")
    assert told.title == "Budget of team-a spent: its queues admit nothing new"

    with django_capture_on_commit_callbacks(execute=True):
        extension = request_budget_extension(
            actor=lead, team=team, amount="50", reason="The last run.", now=NOW
        )
        decide_budget_extension(
            actor=admin, extension_id=extension.pk, approve=True, comment="Yes.", now=NOW
        )
    apply_desired_state(gateway=portal_cluster)
    assert stop_policy(portal_cluster, "team-a", "team-a-train") == "None"
    wait_for(
        lambda: "after-the-budget" in admitted(portal_cluster),
        timeout=15,
        what="the waiting workload admitted once the hold is lifted",
    )
    assert running <= admitted(portal_cluster)
    assert Notification.objects.filter(user__username="member-a", event="budget.released")
    assert Notification.objects.filter(user=lead, event="budget_extension.approved")


def test_without_enforcement_a_spent_budget_holds_nothing(portal_cluster: Gateway) -> None:
    spent("team-a", 120)
    budget = Budget.objects.get(team__slug="team-a")
    budget.amount, budget.enforce = Decimal(100), False
    save_budget(actor=User.objects.get(username="admin"), budget=budget, source="web", now=NOW)
    apply_desired_state(gateway=portal_cluster)
    assert stop_policy(portal_cluster, "team-a", "team-a-train") == "None"
    submit(portal_cluster, "no-budget-hold")
    wait_for(
        lambda: "no-budget-hold" in admitted(portal_cluster),
        timeout=15,
        what="the workload admitted",
    )
