"""The one decision rule for MIG changes on the demo cluster: an approval acts only on the
assessment its approver saw, and what runs is what was computed at the approval."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User

from changes import mig as changes
from changes.executor import advance
from changes.models import MigChangeRequest, MigChangeStep
from kube import Gateway
from portal.models import AuditEvent
from portal.vocabulary.errors import DomainError
from queues.models import ClusterQueue
from queues.services import save_cluster_queue
from tenants.models import Team
from tests.factories import ObservedPodFactory
from tests.support import wait_for

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("portal_cluster")]
INCIDENT = "gpu-a100-03"
DEV_2G = ("a100-80gb-balanced", "nvidia.com/mig-2g.20gb")


def ask() -> MigChangeRequest:
    return changes.request_mig_change(
        actor=User.objects.get(username="lead-a"),
        team=Team.objects.get(slug="team-a"),
        nodes=[INCIDENT],
        target_config="all-3g.40gb",
        reason="gpu-a100-03 was left on a test layout.",
    )


def approve(request: MigChangeRequest, seen: str) -> MigChangeRequest:
    return changes.approve_mig_change(
        request_id=request.pk,
        approver=User.objects.get(username="approver"),
        comment="ok",
        seen=seen,
    )


def set_dev_2g(value: str) -> None:
    admin = User.objects.get(username="admin")
    cq = ClusterQueue.objects.get(name="cq-dev")
    cq.set_nominal_quota(*DEV_2G, value)
    save_cluster_queue(actor=admin, cluster_queue=cq, source="web")


def settle(request: MigChangeRequest, gateway: Gateway) -> str:
    wait_for(
        lambda: advance(request.pk, gateway=gateway).kind != "wait",
        timeout=20,
        what="the change to settle",
    )
    request.refresh_from_db()
    return request.state


def test_a_pod_that_arrived_since_makes_the_approval_stale_and_shows_it() -> None:
    request = ask()
    shown = request.assessment["fingerprint"]
    ObservedPodFactory(
        namespace="team-b",
        name="late-arrival",
        node_name=INCIDENT,
        gpu_requests={"nvidia.com/mig-2g.20gb": 1},
    )
    with pytest.raises(DomainError) as refused:
        approve(request, shown)
    assert refused.value.code == "stale_assessment"
    assert "2 GPU pods would be evicted (was 1)" in refused.value.message
    request.refresh_from_db()
    assert request.state == "pending"
    assert request.assessment["fingerprint"] != shown
    assert {e["pod"] for e in request.assessment["evictions"]} == {"dev-test-1g", "late-arrival"}
    assert AuditEvent.objects.filter(
        event="mig_change.reassessed", target_id=str(request.pk)
    ).exists()
    # The approver reads the new assessment and decides on it.
    approved = approve(request, request.assessment["fingerprint"])
    assert approved.state == "approved"


def test_a_pending_pod_coming_and_going_is_not_a_change_that_matters() -> None:
    request = ask()
    ObservedPodFactory(
        namespace="team-a",
        name="another-waiting-3g",
        phase="Pending",
        gpu_requests={"nvidia.com/mig-3g.40gb": 1},
    )
    assert approve(request, request.assessment["fingerprint"]).state == "approved"


def test_what_runs_is_what_was_computed_at_the_approval(gateway: Gateway) -> None:
    request = ask()
    shown = request.assessment["fingerprint"]
    set_dev_2g("4")  # an admin lowers the dev queue while the request waits
    with pytest.raises(DomainError, match="queue quota changes it carries are different"):
        approve(request, shown)
    request.refresh_from_db()
    approve(request, request.assessment["fingerprint"])
    request.refresh_from_db()
    carried = {(c["resource"], c["from"], c["to"]) for c in request.queue_changes}
    assert ("nvidia.com/mig-2g.20gb", 4, 0) in carried
    assert settle(request, gateway) == "succeeded"
    assert ClusterQueue.objects.get(name="cq-dev").quota()[DEV_2G] == 0


def test_a_queue_edited_after_the_approval_keeps_the_later_value(gateway: Gateway) -> None:
    request = ask()
    approve(request, request.assessment["fingerprint"])
    set_dev_2g("6")  # a later decision by an admin, before the change runs
    assert settle(request, gateway) == "succeeded"
    assert ClusterQueue.objects.get(name="cq-dev").quota()[DEV_2G] == 6
    step = MigChangeStep.objects.get(request=request, step="queues")
    assert "cq-dev a100-80gb-balanced nvidia.com/mig-2g.20gb left at 6 (approved from 8)" in (
        step.message
    )
    assert "nvidia.com/mig-1g.10gb: 16 -> 0" in step.message
