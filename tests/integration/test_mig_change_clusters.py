"""A MIG change on one cluster never touches another cluster's node of the same name: two
demo clusters (the settings' one, and a second devcluster process behind a token), the
same seed fleet on both, a change on each executed through its own cluster's gateway."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth.models import User

from changes import mig
from changes.executor import advance
from changes.models import MigChangeRequest, NodeClaim
from cluster.connection import gateway_for
from cluster.models import Cluster
from cluster.scope import settings_cluster_id
from cluster.services import save_cluster
from kube import Gateway, ObjectRef
from loop.poll import poll_cluster
from tenants.models import Team
from tests.support import wait_for

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("portal_cluster")]
NODE = "gpu-a100-03"
LABEL = "nvidia.com/mig.config"
TOKEN = "cluster-b-token"


@pytest.fixture
def cluster_b(settings: Any) -> Iterator[Cluster]:
    """A second demo cluster, its own process on a free port (the seed fleet, MIG Manager
    at test speed, behind a bearer token), registered as the token-connected ``cluster-b``
    and polled once."""
    arguments = ["--port", "0", "--scenario", "seed", "--token", TOKEN, "--mig-delay", "0.2"]
    process = subprocess.Popen(
        [sys.executable, "-m", "devcluster", *arguments, "--retry-seconds", "0.3"],
        stdout=subprocess.PIPE,
        text=True,
        cwd=settings.BASE_DIR,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert line.startswith("devcluster listening on "), line
        row = Cluster(
            name="cluster-b",
            display_name="Cluster B",
            connection=Cluster.Connection.TOKEN,
            api_url=line.split()[-1],
        )
        save_cluster(
            actor=User.objects.get(username="admin"), cluster=row, credential=TOKEN, source="cli"
        )
        poll_cluster(gateway=gateway_for(row), cluster=row)
        yield row
    finally:
        process.terminate()
        process.wait(timeout=10)


def label_on(gateway: Gateway) -> str:
    node = gateway.get(ObjectRef("v1", "Node", NODE))
    return str(node["metadata"]["labels"].get(LABEL, ""))


def ask_and_approve(cluster: Cluster) -> MigChangeRequest:
    request = mig.request_mig_change(
        actor=User.objects.get(username="lead-a"),
        team=Team.objects.get(slug="team-a"),
        nodes=[NODE],
        target_config="all-3g.40gb",
        reason="gpu-a100-03 back on 3g.40gb",
        cluster=cluster,
    )
    mig.approve_mig_change(
        request_id=request.pk, approver=User.objects.get(username="approver"), comment="ok"
    )
    return request


def run_until_settled(request: MigChangeRequest) -> str:
    """Advance through the request's own cluster's gateway (none is passed)."""
    wait_for(lambda: advance(request.pk).kind != "wait", timeout=30, what="the change to settle")
    request.refresh_from_db()
    return request.state


def test_a_change_on_each_cluster_touches_its_own_node_only(
    portal_cluster: Gateway, cluster_b: Cluster
) -> None:
    a = Cluster.objects.get(pk=settings_cluster_id())
    b_gateway = gateway_for(cluster_b)
    before_a, before_b = label_on(portal_cluster), label_on(b_gateway)
    assert before_a == before_b != "all-3g.40gb"  # the same seed incident on both

    on_a = ask_and_approve(a)
    # A's claim does not hold B's node of the same name: B's change is asked meanwhile.
    on_b = mig.request_mig_change(
        actor=User.objects.get(username="lead-a"),
        team=Team.objects.get(slug="team-a"),
        nodes=[NODE],
        target_config="all-1g.10gb",
        reason="cluster-b's incident node onto 1g.10gb slices",
        cluster=cluster_b,
    )
    assert sorted(NodeClaim.objects.values_list("cluster__name", "node")) == sorted(
        [(a.name, NODE), ("cluster-b", NODE)]
    )

    assert run_until_settled(on_a) == "succeeded"
    assert label_on(portal_cluster) == "all-3g.40gb"
    assert label_on(b_gateway) == before_b  # read back through B's own gateway
    b_node = b_gateway.get(ObjectRef("v1", "Node", NODE))
    assert not b_node["spec"].get("unschedulable")  # never cordoned either

    mig.approve_mig_change(
        request_id=on_b.pk, approver=User.objects.get(username="approver"), comment="ok"
    )
    assert run_until_settled(on_b) == "succeeded"
    assert label_on(b_gateway) == "all-1g.10gb"
    assert label_on(portal_cluster) == "all-3g.40gb"  # A's node keeps A's change
    steps = {(s.node, s.step) for s in on_b.steps.filter(status="done")}
    assert (NODE, "label") in steps and (NODE, "verify") in steps
