"""The fleet page and the team lead's waiting list, from observed tables."""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from cluster.models import Drift, ObservedNode, ObservedPod, ObservedWorkload, SyncRun
from fleet.models import NodePool
from tests.factories import ObservedNodeFactory, ObservedPodFactory
from tests.support import written

pytestmark = pytest.mark.django_db


def node(
    name: str,
    *,
    pool: str = "train",
    config: str = "all-3g.40gb",
    state: str = "success",
    allocatable: dict[str, str] | None = None,
    allocated: dict[str, int] | None = None,
) -> ObservedNode:
    now = timezone.now()
    return ObservedNodeFactory(
        name=name,
        gpu_product="NVIDIA-A100-SXM4-80GB",
        gpu_count=8,
        mig_config=config,
        mig_config_state=state,
        labels={"quartermaster.io/pool": pool},
        allocatable=allocatable or {"nvidia.com/mig-3g.40gb": "16", "cpu": "128"},
        allocated=allocated or {},
        ready=True,
        first_seen=now,
        last_changed=now,
    )


def test_fleet_groups_nodes_by_pool_and_shows_drift(
    client: Client, team_a_member: Any, team_a_on_the_cluster: Any
) -> None:
    NodePool.objects.create(
        name="train", node_selector={"quartermaster.io/pool": "train"}, mig_config="all-3g.40gb"
    )
    node("gpu-a100-01", allocated={"nvidia.com/mig-3g.40gb": 12})
    node(
        "gpu-a100-03",
        config="all-balanced",
        state="failed",
        allocatable={
            "nvidia.com/mig-2g.20gb": "8",
            "nvidia.com/mig-1g.10gb": "16",
            "nvidia.com/mig-3g.40gb": "0",
        },
    )
    node("spare-01", pool="other")
    now = timezone.now()
    Drift.objects.create(
        kind="mig_layout",
        subject="gpu-a100-03",
        field="nvidia.com/mig.config",
        desired="all-3g.40gb",
        observed="all-balanced (failed)",
        detail="Pool train intends all-3g.40gb.",
        first_seen=now,
        last_seen=now,
    )
    SyncRun.objects.create(
        started_at=now - dt.timedelta(seconds=20), finished_at=now, nodes=3, pods=10, duration_ms=42
    )
    client.force_login(team_a_member)
    page = client.get("/fleet/").content.decode()
    assert "Pool train" in page and "(no pool)" in page
    assert "nvidia.com/mig-3g.40gb</code> 12 / 16" in page
    assert "</code> 0 / 0" not in page  # a resource at 0 is absent, not shown
    assert "all-balanced (failed)" in page
    assert "3 nodes, 10 pods in 42 ms" in page


def test_fleet_partial_for_htmx_polling(client: Client, team_a_member: Any) -> None:
    client.force_login(team_a_member)
    response = client.get("/fleet/", headers={"HX-Request": "true"})
    assert "HX-Request" in response["Vary"]
    body = response.content.decode()
    assert body.lstrip().startswith('<div id="fleet-body"')
    assert "<html" not in body


def test_fleet_query_count_does_not_grow_with_nodes(
    client: Client, team_a_member: Any, team_a_on_the_cluster: Any
) -> None:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    NodePool.objects.create(
        name="train", node_selector={"quartermaster.io/pool": "train"}, mig_config="all-3g.40gb"
    )
    client.force_login(team_a_member)

    def queries_with(nodes: int) -> dict[str, int]:
        for i in range(ObservedNode.objects.count(), nodes):
            node(f"n{i:02d}", state="failed" if i % 3 else "success")
        counts = {}
        for url in ("/fleet/", "/fleet/nodes/?pool=train", "/fleet/nodes/?q=n0"):
            with CaptureQueriesContext(connection) as captured:
                assert client.get(url).status_code == 200
            counts[url] = len(captured)
        return counts

    few, many = queries_with(4), queries_with(60)
    assert few == many, (few, many)
    assert few["/fleet/"] <= 15, few
    # the session, the user, the clusters with their polls and pools, the count with the
    # page's nodes, their health, their devices by DRA
    assert few["/fleet/nodes/?pool=train"] == few["/fleet/nodes/?q=n0"] == 6, few


def test_fleet_needs_login(client: Client) -> None:
    assert client.get("/fleet/").status_code == 302


def test_home_explains_what_waits_in_my_namespaces_only(
    client: Client, team_a_admin: Any, team_b: Any
) -> None:
    from tests.factories import NamespaceFactory

    team_a = team_a_admin.memberships.get().team
    NamespaceFactory(name="team-a", team=team_a)
    NamespaceFactory(name="team-b", team=team_b)
    now = timezone.now()
    ObservedWorkload.objects.create(
        namespace="team-a",
        name="job-1",
        queue_name="team-a-train",
        admitted=False,
        reason="Pending",
        message=(
            "couldn't assign flavors to pod set main: insufficient unused quota for "
            "nvidia.com/gpu in flavor h100-80gb, 4 more needed"
        ),
        last_changed=now,
    )
    ObservedWorkload.objects.create(
        namespace="team-b", name="secret-job", queue_name="team-b-train", last_changed=now
    )
    ObservedPodFactory(
        namespace="team-a",
        name="train-3g",
        phase="Pending",
        pending_message="0/5 nodes are available: 3 Insufficient nvidia.com/mig-3g.40gb.",
        last_changed=now,
    )
    client.force_login(team_a_admin)
    written()
    page = client.get("/").content.decode()
    assert "4 more needed" in page
    assert "3 Insufficient nvidia.com/mig-3g.40gb" in page
    assert "secret-job" not in page

    # The API gives the same explanations, scoped the same way.
    written()
    waiting = client.get("/api/v1/waiting/").json()
    assert [(w["kind"], w["name"]) for w in waiting] == [("Workload", "job-1"), ("Pod", "train-3g")]
    home_causes = [w["cause"] for w in waiting]
    assert all(cause in page for cause in home_causes)
    assert "4 more needed" in " ".join(waiting[0]["evidence"])
    # another team's namespace is refused like one that does not exist
    for namespace in ("team-b", "no-such-namespace"):
        refused = client.get(f"/api/v1/waiting/?namespace={namespace}")
        assert (refused.status_code, refused.json()["errors"]) == (
            400,
            {"namespace": ["No such namespace among your teams': use one of team-a."]},
        )
    assert client.get("/api/v1/waiting/?team=team-a&namespace=team-a").json() == waiting


def test_operator_check_page_says_when_no_cluster_is_configured(
    client: Client, team_a_member: Any
) -> None:
    client.force_login(team_a_member)
    page = client.get("/fleet/gpu-operator/").content.decode()
    assert "Cannot read the cluster: No Kubernetes cluster is configured" in page


def test_a_large_pool_lists_problem_nodes_first_a_page_at_a_time(
    client: Client, team_a_member: Any, team_a_on_the_cluster: Any
) -> None:
    from overview import views

    NodePool.objects.create(
        name="train", node_selector={"quartermaster.io/pool": "train"}, mig_config="all-3g.40gb"
    )
    total = views.NODES_PAGE * 2 + 5
    for index in range(total - 1):
        node(f"gpu-{index:04d}")
    node("zz-broken", state="failed")  # last by name, but it needs attention
    client.force_login(team_a_member)

    page = client.get("/fleet/").content.decode()
    assert "gpu-0000" not in page  # the Fleet page sums the pool up: no node rows
    assert f"The {total} nodes, the 1 needing attention first" in page

    first = client.get("/fleet/nodes/?pool=train").content.decode()
    assert first.count('<tr id="node-') == views.NODES_PAGE
    assert first.index("zz-broken") < first.index("gpu-0000")
    assert f"gpu-{views.NODES_PAGE - 1:04d}" not in first  # on the next page
    assert f"nodes 1\N{EN DASH}{views.NODES_PAGE} of {total}" in first
    last = client.get("/fleet/nodes/?pool=train&page=3").content.decode()
    assert last.count('<tr id="node-') == 5 and "zz-broken" not in last

    def rows(url: str) -> str:
        body = client.get(url).content.decode()
        return body[body.index("<tbody>") : body.index("</tbody>")]

    assert rows("/fleet/nodes/?pool=train&page=99") == rows("/fleet/nodes/?pool=train&page=3")
    assert rows("/fleet/nodes/?pool=train&page=ten") == rows("/fleet/nodes/?pool=train")

    found = client.get("/fleet/nodes/?q=zz-").content.decode()
    assert "zz-broken" in found and "gpu-0001" not in found
    assert "No node matches." in client.get("/fleet/nodes/?q=nothing-like-this").content.decode()
    # The old address of the search still finds them.
    moved = client.get("/fleet/?q=zz-&pool=train")
    assert (moved.status_code, moved["Location"]) == (302, "/fleet/nodes/?q=zz-&pool=train")


def health(node_name: str, *, pod_namespace: str, pod: str, xid: int = 0) -> Any:
    from health.models import NodeHealth

    gpus = [
        {
            "index": 0,
            "uuid": "GPU-1",
            "util": 71.0,
            "fb_used_mib": 30000,
            "fb_free_mib": 10960,
            "temperature_c": 55.0,
            "power_w": 210.0,
            "xid": 0,
            "xid_message": "",
            "instances": [
                {
                    "profile": "3g.40gb",
                    "instance": 1,
                    "util": 71.0,
                    "namespace": pod_namespace,
                    "pod": pod,
                },
                {"profile": "3g.40gb", "instance": 2, "util": 0.0, "namespace": "", "pod": ""},
            ],
        },
        {
            "index": 1,
            "uuid": "GPU-2",
            "temperature_c": None,
            "xid": xid,
            "xid_message": "GPU has fallen off the bus",
            "instances": [],
        },
    ]
    findings = (
        [
            {
                "gpu": 1,
                "severity": "critical",
                "title": "GPU 1: Xid 79, GPU has fallen off the bus (PCIe)",
                "advice": "Cordon and drain the node, then reboot it.",
                "xid": 79,
                "needs_drain": True,
            }
        ]
        if xid
        else []
    )
    return NodeHealth.objects.create(
        node=node_name,
        observed_at=timezone.now(),
        gpus=gpus,
        findings=findings,
        worst="critical" if xid else "ok",
    )


def test_the_node_page_draws_the_gpus_and_names_only_my_teams_pods(
    client: Client, team_a_member: Any, team_a_on_the_cluster: Any, team_b_member: Any
) -> None:
    node(
        "gpu-a100-07",
        allocatable={"nvidia.com/mig-3g.40gb": "2"},
        allocated={"nvidia.com/mig-3g.40gb": 1},
    )
    health("gpu-a100-07", pod_namespace="team-a-train", pod="trainer-0", xid=79)
    now = timezone.now()
    ObservedPodFactory(
        namespace="team-a-train",
        name="trainer-0",
        node_name="gpu-a100-07",
        phase="Running",
        gpu_requests={"nvidia.com/mig-3g.40gb": 1},
        last_changed=now,
    )
    from tests.factories import NamespaceFactory

    NamespaceFactory(name="team-a-train", team=team_a_member.memberships.get().team)
    NamespaceFactory(name="team-b-work", team=team_b_member.memberships.get().team)
    client.force_login(team_a_member)
    page = client.get("/fleet/nodes/gpu-a100-07/").content.decode()
    assert "team-a-train/trainer-0" in page
    assert "GPU 1: Xid 79, GPU has fallen off the bus (PCIe)" in page
    assert 'aria-label="GPU 0: 3g.40gb (in use), 3g.40gb (free)"' in page
    assert 'aria-label="GPU 1: not reporting"' in page
    assert "71 %" in page and "55 °C" in page
    client.force_login(team_b_member)
    page = client.get("/fleet/nodes/gpu-a100-07/").content.decode()
    assert "trainer-0" not in page
    assert "1 pod of other teams." in page
    # The fleet's node list shows the strip and the finding, never a pod name.
    listed = client.get("/fleet/nodes/?q=gpu-a100-07").content.decode()
    assert "GPU 1: Xid 79" in listed and "trainer-0" not in listed
    assert 'aria-label="GPU 0: 3g.40gb (in use), 3g.40gb (free)"' in listed
    assert 'href="/fleet/nodes/gpu-a100-07/"' in listed, listed[listed.find("gpu-a100-07") - 300 :][
        :600
    ]
    summary = client.get("/fleet/").content.decode()
    assert "trainer-0" not in summary and "critical</span> 1" in summary
    # The node page and the node list draw a node's GPUs and its GPU resources alike.
    for drawing in (r'<div class="gpus".*?</div>', r'<div class="bar".*?</div>'):
        on_page = re.findall(drawing, page)
        assert on_page and on_page == re.findall(drawing, listed)


def test_without_dcgm_data_the_layout_comes_from_the_config(
    client: Client, team_a_member: Any, team_a_on_the_cluster: Any
) -> None:
    node("gpu-a100-08", config="all-3g.40gb", allocated={"nvidia.com/mig-3g.40gb": 3})
    client.force_login(team_a_member)
    page = client.get("/fleet/nodes/gpu-a100-08/").content.decode()
    assert 'aria-label="GPU 0: 3g.40gb (in use), 3g.40gb (in use)"' in page
    assert 'aria-label="GPU 1: 3g.40gb (in use), 3g.40gb (free)"' in page
    assert "Drawn from the MIG config and the allocated counts (no DCGM data yet)." in page


def test_node_page_queries_do_not_grow_with_pods(
    client: Client, team_a_member: Any, team_a_on_the_cluster: Any
) -> None:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    node("gpu-a100-09")
    health("gpu-a100-09", pod_namespace="x", pod="y")
    client.force_login(team_a_member)

    def queries_with(pods: int) -> int:
        now = timezone.now()
        for i in range(ObservedPod.objects.count(), pods):
            ObservedPodFactory(
                namespace="x",
                name=f"p{i}",
                node_name="gpu-a100-09",
                phase="Running",
                gpu_requests={"nvidia.com/mig-3g.40gb": 1},
                last_changed=now,
            )
        with CaptureQueriesContext(connection) as captured:
            assert client.get("/fleet/nodes/gpu-a100-09/").status_code == 200
        return len(captured)

    assert queries_with(1) == queries_with(60) <= 16


def test_the_fleet_names_only_the_users_own_teams_objects_not_applied(
    client: Client, team_a_member: Any, team_b: Any, approver: Any
) -> None:
    from cluster.models import AppliedObject
    from tests.factories import NamespaceFactory

    NamespaceFactory(name="team-a", team=team_a_member.memberships.get().team)
    NamespaceFactory(name="team-b", team=team_b)
    for namespace, name in (("team-a", "a-quota"), ("team-b", "b-quota"), ("", "cq-shared")):
        AppliedObject.objects.create(
            api_version="v1",
            kind="ResourceQuota" if namespace else "ClusterQueue",
            namespace=namespace,
            name=name,
            outcome=AppliedObject.Outcome.FAILED,
            message=f"{name} refused",
        )
    client.force_login(team_a_member)
    page = client.get("/fleet/").content.decode()
    card = page[
        page.index('id="apply-problems"') : page.index(
            "</section>", page.index('id="apply-problems"')
        )
    ]
    assert "team-a/a-quota" in card and "cq-shared" in card
    assert "b-quota" not in page and "team-b" not in card
    assert "And 1 object of other teams' namespaces." in card
    client.force_login(approver)
    every = client.get("/fleet/").content.decode()
    assert "team-b/b-quota" in every and "other teams' namespaces" not in every
