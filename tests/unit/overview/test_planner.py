"""The Planner page and ``/api/v1/mig-plan/``: the seed incident's fleet planned from the
observed tables, read-only for team leads, turned into MIG change requests by an admin."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from changes.models import MigChangeRequest
from cluster.models import ObservedNode
from fleet.models import NodePool
from health.models import NodeHealth
from portal.models import AuditEvent
from tests.factories import NamespaceFactory, ObservedNodeFactory, ObservedPodFactory

pytestmark = pytest.mark.django_db
G3 = "nvidia.com/mig-3g.40gb"


def node(name: str, config: str, allocatable: dict[str, str], pool: str = "train") -> ObservedNode:
    now = timezone.now()
    return ObservedNodeFactory(
        name=name,
        mig_config=config,
        mig_config_state="failed" if config == "all-balanced" else "success",
        mig_strategy="mixed",
        labels={
            "quartermaster.io/pool": pool,
            "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB",
            "nvidia.com/mig.config": config,
        },
        allocatable=allocatable,
        ready=True,
        first_seen=now,
        last_changed=now,
    )


@pytest.fixture
def seed(team_a: Any, team_b: Any) -> None:
    """The seed incident: two A100s on all-3g.40gb full of team-b's pods, gpu-a100-03 left
    on all-balanced (failed: no 3g.40gb) with team-b's dev test, team-a's 3g pod Pending."""
    NamespaceFactory(name="team-a", team=team_a)
    NamespaceFactory(name="team-b", team=team_b)
    NodePool.objects.create(
        name="train", node_selector={"quartermaster.io/pool": "train"}, mig_config="all-3g.40gb"
    )
    for i in (1, 2):
        node(f"gpu-a100-0{i}", "all-3g.40gb", {G3: "16"})
        ObservedPodFactory(
            namespace="team-b",
            name=f"filler-{i}",
            node_name=f"gpu-a100-0{i}",
            gpu_requests={G3: 16},
        )
    node(
        "gpu-a100-03",
        "all-balanced",
        {"nvidia.com/mig-2g.20gb": "8", "nvidia.com/mig-1g.10gb": "16"},
    )
    ObservedPodFactory(
        namespace="team-b",
        name="dev-test-1g",
        node_name="gpu-a100-03",
        gpu_requests={"nvidia.com/mig-1g.10gb": 4},
    )
    ObservedPodFactory(namespace="team-a", name="train-3g", phase="Pending", gpu_requests={G3: 1})


def test_the_admin_sees_the_seed_incident_planned(
    client: Client, platform_admin: Any, seed: None
) -> None:
    client.force_login(platform_admin)
    page = client.get("/planner/").content.decode()
    assert "1 node to change, 1 pod evicted.\n  Some demand stays short (below)." in page
    # team-b's dev test has no other node: the seed's advice, a pool of its own, is said.
    assert (
        "<li>4 of 4 x nvidia.com/mig-1g.10gb cannot be served in pool train (asked by: running "
        "pods on a node off its pool&#x27;s config).</li>"
    ) in page
    assert (
        "Pool train would need two layouts to cover more of its demand (all-3g.40gb on 2 nodes "
        "and all-balanced on 1 node), but it takes one layout: its intended config is "
        "all-3g.40gb. Allow mixed layouts in the pool, or give that demand a pool of its own."
    ) in page
    assert (
        '<tr id="plan-node-gpu-a100-03"><td><a href="/fleet/nodes/gpu-a100-03/">gpu-a100-03</a>'
        "</td><td>train</td><td><code>all-balanced</code></td><td><code>all-3g.40gb</code></td>"
    ) in page
    assert "team-b/dev-test-1g" in page
    assert (
        '<tr><td><code>nvidia.com/mig-3g.40gb</code></td><td>33</td><td><span class="tag warn">'
        "32</span></td><td>48</td></tr>"
    ) in page
    assert "Needs a drain" in page
    assert "Ask for these MIG changes" in page
    assert '<a href="/planner/" aria-current="page">Planner</a>' in page


def test_a_team_lead_reads_the_plan_without_other_teams_pods_and_cannot_ask(
    client: Client, team_a_admin: Any, seed: None
) -> None:
    client.force_login(team_a_admin)
    page = client.get("/planner/").content.decode()
    assert "<code>all-3g.40gb</code>" in page
    assert "(another team&#x27;s pod)" in page and "dev-test-1g" not in page
    assert "Ask for these MIG changes" not in page
    assert ">Planner</a>" not in page  # the link is for admins
    refused = client.post("/planner/", {"team": "team-a", "reason": "x", "fingerprint": "y"})
    assert refused.status_code == 403
    assert not MigChangeRequest.objects.exists()


def test_a_member_may_not_open_the_planner(client: Client, team_a_member: Any, seed: None) -> None:
    client.force_login(team_a_member)
    assert client.get("/planner/").status_code == 403
    assert client.get("/api/v1/mig-plan/").status_code == 403


def test_the_admin_turns_the_plan_into_a_pending_mig_change(
    client: Client, platform_admin: Any, seed: None
) -> None:
    client.force_login(platform_admin)
    fingerprint = client.get("/api/v1/mig-plan/").json()["fingerprint"]
    response = client.post(
        "/planner/",
        {"team": "team-a", "reason": "team-a's 3g pod waits", "fingerprint": fingerprint},
    )
    assert response.status_code == 302 and response["Location"] == "/changes/"
    (request,) = MigChangeRequest.objects.all()
    assert request.nodes == ["gpu-a100-03"]
    assert request.target_config == "all-3g.40gb"
    assert request.pool_name == "train" and request.team.slug == "team-a"
    assert request.state == "pending" and request.verdict == "needs_drain"
    assert request.reason == f"team-a's 3g pod waits (MIG layout planner, plan {fingerprint})"
    events = list(AuditEvent.objects.order_by("pk").values_list("event", flat=True))
    assert events == ["mig_change.requested", "mig_plan.requested"]
    planned = AuditEvent.objects.get(event="mig_plan.requested")
    assert planned.new == {
        "cluster": "default",
        "fingerprint": fingerprint,
        "requests": [request.pk],
        "batches": [{"pool": "train", "target_config": "all-3g.40gb", "nodes": ["gpu-a100-03"]}],
    }


def test_a_plan_that_changed_since_it_was_read_is_refused(
    client: Client, platform_admin: Any, seed: None
) -> None:
    client.force_login(platform_admin)
    response = client.post("/planner/", {"team": "team-a", "reason": "r", "fingerprint": "old"})
    assert response.status_code == 409
    assert (
        "The plan changed since it was shown (the fleet or the demand moved): read the new plan "
        "and ask again."
    ) in response.content.decode()
    assert not MigChangeRequest.objects.exists()


def test_a_missing_reason_is_a_field_error(client: Client, platform_admin: Any, seed: None) -> None:
    client.force_login(platform_admin)
    response = client.post("/planner/", {"team": "team-a", "reason": " ", "fingerprint": "x"})
    assert response.status_code == 400
    assert (
        '<p class="error" role="alert">Say why: approvers and the teams on these nodes read it.</p>'
    ) in response.content.decode()


def test_unhealthy_gpus_and_held_nodes_are_left_out(
    client: Client, platform_admin: Any, seed: None
) -> None:
    NodeHealth.objects.create(
        node="gpu-a100-02",
        observed_at=timezone.now(),
        findings=[{"gpu": 3, "severity": "critical", "needs_drain": True}],
        worst="critical",
    )
    client.force_login(platform_admin)
    body = client.get("/api/v1/mig-plan/").json()
    lines = {line["resource"]: line for line in body["lines"]}
    assert lines[G3] == {"resource": G3, "demand": 33, "before": 30, "after": 46}
    MigChangeRequest.objects.create(
        team_id=MigChangeRequest._meta.get_field("team")
        .related_model.objects.get(slug="team-b")
        .pk,
        requested_by=platform_admin,
        nodes=["gpu-a100-03"],
        target_config="all-disabled",
        reason="held",
        state="pending",
    )
    held = client.get("/api/v1/mig-plan/").json()
    assert held["nodes"] == []
    assert held["notes"] == [
        f"gpu-a100-03 is held by open request #{MigChangeRequest.objects.get().pk}."
    ]
    # What runs is served first: the waiting pod stays short, then what runs beyond the
    # healthy GPUs.
    assert [s["sentence"] for s in held["shortfalls"]] == [
        "1 of 1 x nvidia.com/mig-3g.40gb cannot be served in pool train (asked by: Pending "
        "team-a/train-3g).",
        "2 of 32 x nvidia.com/mig-3g.40gb cannot be served in pool train (asked by: running pods).",
    ]


def test_the_api_gives_the_plan_and_asks_for_it_with_if_match(
    client: Client, platform_admin: Any, seed: None
) -> None:
    client.force_login(platform_admin)
    got = client.get("/api/v1/mig-plan/")
    body = got.json()
    assert got["ETag"] == f'"{body["fingerprint"]}"'
    assert body["nodes"] == [
        {
            "name": "gpu-a100-03",
            "pool": "train",
            "config_before": "all-balanced",
            "config_after": "all-3g.40gb",
            "before": {"nvidia.com/mig-1g.10gb": 16, "nvidia.com/mig-2g.20gb": 8},
            "after": {G3: 16},
            "evicts": ["team-b/dev-test-1g"],
        }
    ]
    assert body["batches"][0]["verdict"] == "needs_drain"
    assert (body["solver"], body["status"], body["gap"]) == ("highs", "optimal", 0.0)
    stale = client.post(
        "/api/v1/mig-plan/",
        json.dumps({"team": "team-a", "reason": "now"}),
        content_type="application/json",
        headers={"If-Match": '"0000"'},
    )
    assert stale.status_code == 409 and stale.json()["code"] == "stale_plan"
    created = client.post(
        "/api/v1/mig-plan/",
        json.dumps({"team": "team-a", "reason": "now"}),
        content_type="application/json",
        headers={"If-Match": got["ETag"]},
    )
    assert created.status_code == 201
    assert [(r["nodes"], r["target_config"], r["state"]) for r in created.json()] == [
        (["gpu-a100-03"], "all-3g.40gb", "pending")
    ]
    unknown = client.post(
        "/api/v1/mig-plan/",
        json.dumps({"team": "team-a", "reason": "now", "extra": 1}),
        content_type="application/json",
    )
    assert unknown.status_code == 400
    assert unknown.json()["errors"] == {"extra": ["Unknown field."]}


def test_a_team_lead_cannot_ask_over_the_api(client: Client, team_a_admin: Any, seed: None) -> None:
    client.force_login(team_a_admin)
    response = client.post(
        "/api/v1/mig-plan/",
        json.dumps({"team": "team-a", "reason": "r", "fingerprint": "x"}),
        content_type="application/json",
    )
    assert response.status_code == 403
    assert response.json()["detail"] == "Only platform admins turn a plan into MIG change requests."


def test_the_planner_page_query_count_does_not_grow_with_nodes(
    client: Client, platform_admin: Any, seed: None, django_assert_max_num_queries: Any
) -> None:
    for i in range(40):
        node(f"n{i:02d}", "all-3g.40gb", {G3: "16"})
        ObservedPodFactory(
            namespace="team-b", name=f"p{i}", node_name=f"n{i:02d}", gpu_requests={G3: 2}
        )
    client.force_login(platform_admin)
    with django_assert_max_num_queries(24):  # the same with 4 nodes or 4,000
        assert client.get("/planner/").status_code == 200


@pytest.mark.parametrize(
    ("gap", "words"),
    [
        (0.0, "optimality gap 0%)"),
        (0.0008, "optimality gap 0.1%)"),
        (None, "optimality gap unknown)"),
    ],
)
def test_the_optimality_gap_reads_as_every_percentage(
    client: Client, platform_admin: Any, seed: None, monkeypatch: Any, gap: float | None, words: str
) -> None:
    import dataclasses

    from changes import planning

    solve = planning.plan
    monkeypatch.setattr(
        planning, "plan", lambda *a, **k: dataclasses.replace(solve(*a, **k), gap=gap)
    )
    client.force_login(platform_admin)
    page = client.get("/planner/").content.decode()
    assert words in page


@pytest.fixture
def two_clusters(seed: None) -> Any:
    """The seed incident on the settings' cluster; an inference cluster with nodes of the same
    names, every one already on all-3g.40gb, and nothing waiting there."""
    from cluster.models import Cluster
    from cluster.scope import settings_cluster

    infer = Cluster.objects.create(name="inference", display_name="Inference", connection="token")
    NodePool.objects.create(
        cluster=infer,
        name="train",
        node_selector={"quartermaster.io/pool": "train"},
        mig_config="all-3g.40gb",
    )
    for i in (1, 2, 3):
        ObservedNodeFactory(
            cluster=infer,
            name=f"gpu-a100-0{i}",
            mig_config="all-3g.40gb",
            mig_strategy="mixed",
            labels={
                "quartermaster.io/pool": "train",
                "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB",
                "nvidia.com/mig.config": "all-3g.40gb",
            },
            allocatable={G3: "16"},
        )
    return settings_cluster(), infer


def test_each_cluster_is_planned_on_its_own_nodes_and_asked_for_there(
    client: Client, platform_admin: Any, two_clusters: Any
) -> None:
    train, _ = two_clusters
    client.force_login(platform_admin)
    flat = client.get("/api/v1/mig-plan/")
    assert flat.status_code == 400 and "cluster" in flat.json()["errors"]
    there = client.get("/api/v1/clusters/inference/mig-plan/").json()
    assert there["cluster"] == "inference" and there["nodes"] == [] and there["batches"] == []
    here = client.get("/api/v1/mig-plan/?cluster=default").json()
    assert here["cluster"] == "default"
    assert [n["name"] for n in here["nodes"]] == ["gpu-a100-03"]
    # a plan read on one cluster is never asked for on the other
    elsewhere = client.post(
        "/api/v1/clusters/inference/mig-plan/",
        json.dumps({"team": "team-a", "reason": "now", "fingerprint": here["fingerprint"]}),
        content_type="application/json",
    )
    assert elsewhere.status_code == 409 and elsewhere.json()["code"] == "stale_plan"
    assert not MigChangeRequest.objects.exists()
    response = client.post(
        "/planner/",
        {
            "cluster": "default",
            "team": "team-a",
            "reason": "team-a's 3g pod waits",
            "fingerprint": here["fingerprint"],
        },
    )
    assert response.status_code == 302
    (request,) = MigChangeRequest.objects.all()
    assert (request.cluster_id, request.nodes) == (train.pk, ["gpu-a100-03"])
    assert request.pool is not None and request.pool.cluster_id == train.pk
    assert client.get("/api/v1/clusters/nowhere/mig-plan/").status_code == 404


def test_the_planner_page_asks_for_a_cluster_when_all_are_chosen(
    client: Client, team_a_admin: Any, two_clusters: Any
) -> None:
    # team-a works on both clusters (a lead is offered the clusters their teams are on)
    team = team_a_admin.memberships.get().team
    NamespaceFactory(
        name="team-a-infer",
        team=team,
        cluster=ObservedNode.objects.on_every_cluster()
        .get(name="gpu-a100-03", cluster__name="inference")
        .cluster,
    )
    client.force_login(team_a_admin)
    every = client.get("/planner/?cluster=all").content.decode()
    assert 'id="plan-choose-cluster"' in every and 'id="plan-summary"' not in every
    assert 'href="/planner/?cluster=inference"' in every
    infer = client.get("/planner/?cluster=inference").content.decode()
    assert "No node needs to change." in infer and "gpu-a100-03" not in infer
    train = client.get("/planner/?cluster=default").content.decode()
    assert 'href="/fleet/nodes/gpu-a100-03/?cluster=default"' in train


def test_what_stays_short_counts_other_teams_pods_for_a_lead(
    client: Client, team_a_admin: Any, platform_admin: Any, seed: None
) -> None:
    """Signed in as team-a's lead, team-b's waiting pods are counted, never named (they
    were, in "What stays short"); an admin reads their names."""
    for i in (2, 3):
        ObservedPodFactory(
            namespace="team-b",
            name=f"gang-eval-worker-{i}",
            phase="Pending",
            gpu_requests={"nvidia.com/gpu": 4},
        )
    client.force_login(team_a_admin)
    page = client.get("/planner/").content.decode()
    assert "gang-eval-worker" not in page
    assert "2 Pending pods in team-b" in page
    client.force_login(platform_admin)
    page = client.get("/planner/").content.decode()
    assert "Pending team-b/gang-eval-worker-2; Pending team-b/gang-eval-worker-3" in page


def test_a_pod_no_node_could_ever_hold_is_said_and_not_planned_for(
    client: Client, platform_admin: Any, seed: None
) -> None:
    ObservedPodFactory(
        namespace="team-a",
        name="eval-sweep",
        phase="Pending",
        gpu_requests={"nvidia.com/gpu": 12},
    )
    client.force_login(platform_admin)
    body = client.get("/api/v1/mig-plan/").json()
    assert (
        "team-a/eval-sweep asks for 12 x nvidia.com/gpu in one pod; no node can ever offer "
        "more than 8: no layout serves it, so the plan leaves it out."
    ) in body["notes"]
    assert not any("eval-sweep" in s["sentence"] for s in body["shortfalls"])
