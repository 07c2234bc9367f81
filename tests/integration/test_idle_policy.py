"""The run command's idle notebook found from the demo cluster's DCGM exporter, and the idle policy
suspending it only when the policy is on, the grace is over and the readings are recent:
its Workload deactivated, which the demo cluster honours as Kueue does (evicted, kept)."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from cluster.models import ObservedPod
from cluster.selectors import rendering_for
from cluster.services import settings_cluster
from health.models import NodeHealth
from health.services import collect_gpu_health
from idle import policy
from idle.enforce import enforce_idle_policy, exemption
from idle.models import DeviceRun, IdlePolicy, IdleSpell
from idle.services import record_readings
from kube import Gateway, ObjectRef
from loop.poll import poll_cluster
from portal.models import AuditEvent, Notification
from tenants.models import Membership, Team
from tests.support import wait_for

pytestmark = pytest.mark.django_db


def _notebook(gateway: Gateway) -> ObservedPod:
    """The notebook's pod running, as the poll sees it."""

    def running() -> ObservedPod | None:
        poll_cluster(gateway=gateway)
        return (
            ObservedPod.objects.on(settings_cluster())
            .filter(namespace="team-dev", name__startswith="notebook-idle", phase="Running")
            .exclude(workload_name="")
            .first()
        )

    return wait_for(running, timeout=30, what="the notebook's pod running")  # type: ignore[no-any-return]


@pytest.mark.demo_cluster(idle_notebook=True)
def test_the_idle_notebook_is_suspended_only_after_the_grace_with_the_policy_on(
    portal_cluster: Gateway, django_capture_on_commit_callbacks: Any
) -> None:
    cluster = settings_cluster()
    pod = _notebook(portal_cluster)
    assert collect_gpu_health(portal_cluster)["unreadable"] == 0
    rows = list(NodeHealth.objects.on(cluster))
    # the collection kept each device's run (the health app's hook), the notebook's under 5 %
    kept = DeviceRun.objects.on(cluster).get(pod=pod.name)
    assert (kept.node, kept.profile, kept.util, kept.threshold) == (
        "gpu-a100-03",
        "2g.20gb",
        0.0,
        5.0,
    )
    DeviceRun.objects.on(cluster).delete()
    now = timezone.now()
    # The same readings over the last 20 minutes (the demo's A100 pool judges over 5).
    for minute in range(20, -1, -1):
        with django_capture_on_commit_callbacks(execute=True):
            record_readings(cluster.pk, rows, now=now - dt.timedelta(minutes=minute))
    (spell,) = IdleSpell.objects.on(cluster).filter(ended_at__isnull=True, namespace="team-dev")
    # team-a's notebook too, a pod holding an H100 (the demo's h100 pool judges over 5), so
    # team-a's lead, who sees only team-a's, finds one
    (mine,) = IdleSpell.objects.on(cluster).filter(ended_at__isnull=True, namespace="team-a")
    assert (mine.pod, mine.workload, mine.gpus, mine.pool) == ("notebook-a", "", 1.0, "h100")
    assert (spell.namespace, spell.workload, spell.gpus, spell.pool) == (
        "team-dev",
        pod.workload_name,
        round(2 / 7, 3),
        "train",
    )
    assert spell.found_at == now - dt.timedelta(minutes=15)
    viewer = User.objects.get(username="viewer-dev")
    assert Notification.objects.filter(user=viewer, event="idle.found").count() == 1
    team = Team.objects.get(slug="team-dev")
    lead = User.objects.get(username="lead-a")  # made team-dev's lead for the approval
    Membership.objects.create(user=lead, team=team, role=Membership.Role.LEAD)

    admin = User.objects.get(username="admin")
    assert enforce_idle_policy(cluster=cluster, gateway=portal_cluster, now=now) == []  # off
    policy.save_idle_policy(
        actor=admin,
        team=team,
        grace_minutes=30,
        exempt_namespaces=[],
        exempt_priority_classes=[],
        source="web",
    )
    policy.switch_on(actor=admin, team=team, source="web")
    assert enforce_idle_policy(cluster=cluster, gateway=portal_cluster, now=now) == []  # awaiting
    policy.approve(actor=lead, team=team, source="web")
    assert enforce_idle_policy(cluster=cluster, gateway=portal_cluster, now=now) == []  # grace
    policy.save_idle_policy(
        actor=admin,
        team=team,
        grace_minutes=10,
        exempt_namespaces=[],
        exempt_priority_classes=[],
        source="web",
    )
    # readings not recent (the exporter silent since): never suspended
    later = now + dt.timedelta(minutes=10)
    assert enforce_idle_policy(cluster=cluster, gateway=portal_cluster, now=later) == []

    with django_capture_on_commit_callbacks(execute=True):
        assert enforce_idle_policy(cluster=cluster, gateway=portal_cluster, now=now) == [spell.pk]
    version = rendering_for(cluster)[1]
    ref = ObjectRef(f"kueue.x-k8s.io/{version}", "Workload", spell.workload, "team-dev")

    def evicted() -> dict[str, Any] | None:
        live = portal_cluster.get(ref)
        conditions = {c["type"]: c for c in live["status"].get("conditions") or []}
        return live if conditions.get("Evicted", {}).get("reason") == "Deactivated" else None

    live = wait_for(evicted, timeout=20, what="the Workload evicted as deactivated")
    assert live["spec"]["active"] is False  # kept, to be reactivated
    assert "admission" not in live["status"]
    conditions = {c["type"]: c for c in live["status"]["conditions"]}
    assert (conditions["Evicted"]["message"], conditions["QuotaReserved"]["status"]) == (
        "The workload is deactivated",
        "False",
    )
    wait_for(
        lambda: (
            not [
                p
                for p in portal_cluster.list("v1", "Pod", namespace="team-dev")
                if p["metadata"]["name"] == pod.name
            ]
        ),
        timeout=20,
        what="the notebook's pod gone",
    )
    audit = AuditEvent.objects.get(event="idle_workload.suspended")
    assert (audit.actor_name, audit.new["workload"]) == ("system", f"team-dev/{spell.workload}")
    assert Notification.objects.filter(user=viewer, event="idle.suspended").count() == 1
    assert IdlePolicy.objects.get(team=team).approved_by == lead


def test_what_is_exempt_is_never_suspended(db: Any) -> None:
    held = IdlePolicy(exempt_namespaces=["team-a-dev"], exempt_priority_classes=["interactive"])
    spell = IdleSpell(namespace="team-a", workload="w")
    assert exemption(IdleSpell(namespace="team-a-dev", workload="w"), held, None).startswith(
        "Namespace team-a-dev is exempt"
    )
    labelled = {"metadata": {"labels": {policy.EXEMPT_LABEL: "true"}}, "spec": {"active": True}}
    assert exemption(spell, held, labelled) == f"The workload carries {policy.EXEMPT_LABEL}=true."
    v1beta1 = {"metadata": {}, "spec": {"priorityClassName": "interactive"}}
    v1beta2 = {"metadata": {}, "spec": {"priorityClassRef": {"name": "interactive"}}}
    assert "Priority class interactive" in exemption(spell, held, v1beta1)
    assert "Priority class interactive" in exemption(spell, held, v1beta2)
    assert exemption(spell, held, {"metadata": {}, "spec": {"active": True}}) == ""
