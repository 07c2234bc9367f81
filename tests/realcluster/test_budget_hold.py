"""A LocalQueue the portal holds for its team's spent budget (``stopPolicy: Hold``, rendered
and applied by the loop) makes real Kueue admit nothing new from it; lifted, Kueue admits."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

import pytest
from django.contrib.auth.models import User

from budgets.models import Budget
from budgets.services import save_budget
from kube import Gateway, ObjectRef
from loop.apply import apply_desired_state
from tests.realcluster.kit import RealCluster, need_kit
from tests.realcluster.test_loop import hands, job
from tests.support import wait_for
from usage.models import Rollup, SamplingState

need_kit()
pytestmark = pytest.mark.django_db

NOW = dt.datetime(2026, 12, 10, tzinfo=dt.UTC)
KUEUE = "kueue.x-k8s.io/v1beta2"
NAME = "rc-budget-held"


def the_workload(admin: Gateway) -> dict[str, Any] | None:
    for w in admin.list(KUEUE, "Workload", namespace="team-a"):
        if (w["metadata"].get("ownerReferences") or [{}])[0].get("name") == NAME:
            return w
    return None


def conditions(workload: dict[str, Any] | None) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in ((workload or {}).get("status") or {}).get("conditions") or []}


def enforce(on: bool) -> None:
    budget = Budget.objects.get(team__slug="team-a")
    budget.amount, budget.enforce = Decimal(100), on
    save_budget(actor=User.objects.get(username="admin"), budget=budget, source="api", now=NOW)


def test_a_held_local_queue_stops_real_kueue_admitting_until_released(
    real_portal: Gateway, real_cluster: RealCluster
) -> None:
    Rollup.objects.create(
        period="day",
        start=dt.datetime(2026, 12, 1, tzinfo=dt.UTC),
        kind="team",
        owner="team-a",
        resource="nvidia.com/gpu",
        gpu_seconds=120 * 3600,
    )
    SamplingState.objects.update_or_create(pk=1, defaults={"rolled_up_to": NOW})
    admin = hands(real_cluster, "kubectl-create")
    try:
        enforce(True)
        report = apply_desired_state(gateway=real_portal)
        assert not report.failed and not report.conflicts, report
        lq = admin.get(ObjectRef(KUEUE, "LocalQueue", "team-a-train", "team-a"))
        assert lq["spec"]["stopPolicy"] == "Hold"
        admin.apply(job(NAME, "team-a", "team-a-train", 1))
        reserved = wait_for(
            lambda: conditions(the_workload(admin)).get("QuotaReserved"),
            timeout=20,
            what="Kueue to look at the workload",
        )
        assert reserved["status"] == "False", reserved
        assert "inactive" in reserved["message"].lower() or "stop" in reserved["message"].lower()
        assert conditions(the_workload(admin)).get("Admitted", {}).get("status") != "True"
        enforce(False)
        report = apply_desired_state(gateway=real_portal)
        assert not report.failed and not report.conflicts, report
        wait_for(
            lambda: conditions(the_workload(admin)).get("Admitted", {}).get("status") == "True",
            timeout=20,
            what="Kueue to admit it once the hold is lifted",
        )
    finally:
        real_cluster.remove_job("team-a", NAME)
