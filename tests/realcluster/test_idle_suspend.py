"""The idle policy's suspension on real Kueue: the portal deactivates an idle workload's
Workload (``spec.active: false``) as its ServiceAccount, and real Kueue evicts it, keeps it
and never admits it again while it stays inactive; a Workload labelled exempt is left
running. (Kueue copies a Job's labels onto its Workload only for the keys its configuration's
``integrations.labelKeysToCopy`` lists: the label is read from the Workload.)"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from django.utils import timezone

from cluster.services import settings_cluster
from idle.enforce import enforce_idle_policy
from idle.models import IdlePolicy, IdleSpell
from idle.policy import EXEMPT_LABEL
from kube import Gateway, ObjectRef
from tenants.models import Team
from tests.realcluster.kit import RealCluster, need_kit
from tests.realcluster.test_budget_hold import KUEUE, conditions
from tests.realcluster.test_loop import hands, job
from tests.support import wait_for

need_kit()
pytestmark = pytest.mark.django_db

IDLE, EXEMPT = "rc-idle-notebook", "rc-idle-exempt"


def workload_of(admin: Gateway, owner: str) -> dict[str, Any] | None:
    for w in admin.list(KUEUE, "Workload", namespace="team-a"):
        if (w["metadata"].get("ownerReferences") or [{}])[0].get("name") == owner:
            return w
    return None


def admitted(admin: Gateway, owner: str) -> dict[str, Any]:
    wait_for(
        lambda: conditions(workload_of(admin, owner)).get("Admitted", {}).get("status") == "True",
        timeout=20,
        what=f"Kueue to admit {owner}",
    )
    return workload_of(admin, owner) or {}


def spell_for(workload: dict[str, Any], now: dt.datetime) -> IdleSpell:
    team = Team.objects.get(slug="team-a")
    found = now - dt.timedelta(hours=3)
    return IdleSpell.objects.create(
        cluster=settings_cluster(),
        team=team,
        namespace="team-a",
        workload=workload["metadata"]["name"],
        pod=f"{workload['metadata']['name']}-pod",
        gpus=1,
        threshold=5,
        idle_since=found,
        found_at=found,
        last_seen=now,
    )


def test_a_suspended_idle_workload_is_evicted_and_kept_by_real_kueue(
    real_portal: Gateway, real_cluster: RealCluster
) -> None:
    admin = hands(real_cluster, "kubectl-create")
    IdlePolicy.objects.create(
        team=Team.objects.get(slug="team-a"),
        state=IdlePolicy.State.ON,
        grace_minutes=0,
        approved_at=timezone.now(),
    )
    try:
        admin.apply(job(IDLE, "team-a", "team-a-train", 1))
        admin.apply(job(EXEMPT, "team-a", "team-a-train", 1))
        now = timezone.now()
        idle = spell_for(admitted(admin, IDLE), now)
        exempt = admitted(admin, EXEMPT)
        admin.merge_patch(
            ObjectRef(KUEUE, "Workload", exempt["metadata"]["name"], "team-a"),
            {"metadata": {"labels": {EXEMPT_LABEL: "true"}}},
        )
        kept = spell_for(exempt, now)
        assert enforce_idle_policy(cluster=settings_cluster(), gateway=real_portal, now=now) == [
            idle.pk
        ]
        evicted = wait_for(
            lambda: conditions(workload_of(admin, IDLE)).get("Evicted"),
            timeout=20,
            what="Kueue to evict the deactivated workload",
        )
        assert evicted["status"] == "True" and evicted["reason"] == "Deactivated", evicted
        wait_for(
            lambda: (
                conditions(workload_of(admin, IDLE)).get("Admitted", {}).get("status") != "True"
            ),
            timeout=20,
            what="Kueue to release its quota",
        )
        after = workload_of(admin, IDLE)
        assert after is not None and after["spec"]["active"] is False  # kept, not deleted
        assert conditions(workload_of(admin, EXEMPT))["Admitted"]["status"] == "True"
        kept.refresh_from_db()
        assert kept.suspended_at is None and EXEMPT_LABEL in kept.note
    finally:
        real_cluster.remove_job("team-a", IDLE)
        real_cluster.remove_job("team-a", EXEMPT)
