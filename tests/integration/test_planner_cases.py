"""The MIG layout planner on the demo cluster, in the issue's cases: the seed incident (it
proposes the fix), and after the fix with the queues edited as admins do (it proposes
nothing: no running work un-served, no change that just succeeded undone)."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User

from changes import mig
from changes.executor import advance
from changes.planning import make_plan
from cluster.scope import settings_cluster
from kube import Gateway
from loop.poll import poll_cluster
from queues.models import ClusterQueue
from queues.services import save_cluster_queue
from tenants.models import Team
from tests.support import wait_for

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("portal_cluster")]
G3 = "nvidia.com/mig-3g.40gb"


def proposed(seconds: float = 1.0) -> list[tuple[str, str]]:
    planned = make_plan(settings_cluster(), seconds=seconds)
    return [(n.name, n.config_after) for n in planned.plan.changed]


def test_the_seed_incident_is_planned_as_its_fix_and_nothing_after_it(gateway: Gateway) -> None:
    assert proposed() == [("gpu-a100-03", "all-3g.40gb")]
    fix_the_seed_incident(gateway)
    assert proposed() == []


def fix_the_seed_incident(gateway: Gateway) -> None:
    """The fix run (approved, executed, polled), then cq-train edited as the issue's admins do."""
    request = mig.request_mig_change(
        actor=User.objects.get(username="lead-a"),
        team=Team.objects.get(slug="team-a"),
        nodes=["gpu-a100-03"],
        target_config="all-3g.40gb",
        reason="gpu-a100-03 was left on a test layout.",
    )
    mig.approve_mig_change(
        request_id=request.pk, approver=User.objects.get(username="approver"), comment="ok"
    )
    wait_for(
        lambda: advance(request.pk, gateway=gateway).kind != "wait",
        timeout=20,
        what="the fix to run",
    )
    request.refresh_from_db()
    assert request.state == "succeeded"
    poll_cluster(gateway=gateway)
    # The edits: cq-train's h100 quota 12 -> 16 with a borrowing limit of 4, its
    # 3g.40gb nominal quota 40.
    admin = User.objects.get(username="admin")
    train = ClusterQueue.objects.get(name="cq-train")
    train.set_nominal_quota("h100-80gb", "nvidia.com/gpu", "16")
    train.set_nominal_quota("a100-80gb-3g", G3, "40")
    for group in train.resource_groups:
        for flavor in group["flavors"]:
            if flavor["name"] == "h100-80gb":
                flavor["resources"][0]["borrowingLimit"] = "4"
    save_cluster_queue(
        actor=admin,
        cluster_queue=train,
        source="web",
        promise_more_than_exists=True,
        override_reason="Room for the spring training runs.",
    )
