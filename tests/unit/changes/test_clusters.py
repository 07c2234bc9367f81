"""A MIG change, a drain and a quota request belong to one cluster: its nodes, its claims,
its facts; the API names the cluster and filters by it."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.test import Client
from django.utils import timezone

from changes import mig
from changes.executor import advance
from changes.facts import fleet_facts
from changes.models import MigChangeRequest, NodeClaim, QuotaChangeRequest
from cluster.models import Cluster, ObservedWorkload
from cluster.scope import settings_cluster_id
from fleet.models import NodePool
from queues.models import ClusterQueue, Cohort, LocalQueue, ResourceFlavor
from queues.observed import observed_kueue
from queues.selectors import HIDDEN, cluster_queue_what_if, kueue_world
from tenants.models import Namespace, Team
from tests.factories import ObservedNodeFactory, ObservedPodFactory
from tests.support import bearer

pytestmark = pytest.mark.django_db
NODE = "gpu-a100-03"


@pytest.fixture
def two_clusters(fleet: None) -> tuple[Cluster, Cluster]:
    """The demo's (settings') cluster with the seed incident's node, and a second cluster
    ``cluster-b`` with a node of the same name (and one of its own) on another layout."""
    a = Cluster.objects.get(pk=settings_cluster_id())
    # A port nothing listens on: reads of cluster-b's pods are refused at once, and said.
    b = Cluster.objects.create(
        name="cluster-b",
        display_name="Cluster B",
        connection=Cluster.Connection.TOKEN,
        api_url="http://127.0.0.1:9",
    )
    for name in (NODE, "gpu-b-only"):
        ObservedNodeFactory(
            cluster=b,
            name=name,
            mig_config="all-1g.10gb",
            labels={"nvidia.com/mig.config": "all-1g.10gb", "quartermaster.io/pool": "train"},
            allocatable={"nvidia.com/mig-1g.10gb": "56"},
        )
    ObservedPodFactory(
        cluster=b,
        namespace="team-b",
        name="b-pod",
        node_name=NODE,
        gpu_requests={"nvidia.com/mig-1g.10gb": 2},
    )
    return a, b


@pytest.fixture
def team_a_on_b(two_clusters: tuple[Cluster, Cluster]) -> tuple[Cluster, Cluster]:
    """team-a has a namespace on cluster-b too: lead-a may see both clusters."""
    Namespace.objects.create(
        name="team-a-b", team=Team.objects.get(slug="team-a"), cluster=two_clusters[1]
    )
    return two_clusters


def ask(cluster: Cluster | None, nodes: list[str], **extra: Any) -> MigChangeRequest:
    return mig.request_mig_change(
        actor=User.objects.get(username="lead-a"),
        team=Team.objects.get(slug="team-a"),
        nodes=nodes,
        target_config="all-3g.40gb",
        reason="3g slices for team-a",
        cluster=cluster,
        **extra,
    )


def test_the_facts_are_one_clusters(two_clusters: tuple[Cluster, Cluster]) -> None:
    a, b = two_clusters
    on_a, on_b = fleet_facts(cluster=a), fleet_facts(cluster=b)
    assert [n.mig_config for n in on_a.nodes if n.name == NODE] == ["all-balanced"]
    assert [n.mig_config for n in on_b.nodes if n.name == NODE] == ["all-1g.10gb"]
    assert "gpu-b-only" not in {n.name for n in on_a.nodes}
    assert {p.name for p in on_b.pods} == {"b-pod"}
    assert "b-pod" not in {p.name for p in on_a.pods}
    # The desired state of the demo is on the settings' cluster: none of it on cluster-b.
    assert on_a.queues and on_a.quotas and not on_b.queues and not on_b.quotas


def test_with_several_clusters_a_change_names_its_cluster(
    team_a_on_b: tuple[Cluster, Cluster],
) -> None:
    with pytest.raises(ValidationError) as refused:
        ask(None, [NODE])
    names = ", ".join(sorted([team_a_on_b[0].name, "cluster-b"]))
    assert refused.value.message_dict == {
        "cluster": [f"Choose the cluster the nodes are on ({names})."]
    }
    assert not MigChangeRequest.objects.exists()


def test_with_several_clusters_a_change_of_nodes_on_one_of_them_is_on_that_one(
    team_a_on_b: tuple[Cluster, Cluster],
) -> None:
    """The README's example names only nodes: they are on one cluster, so the change is
    there (it was a 400 "Choose the cluster" on the two-cluster demo)."""
    _, b = team_a_on_b
    assert ask(None, ["gpu-b-only"]).cluster_id == b.pk


def test_a_node_of_another_cluster_is_a_field_error_naming_it(
    team_a_on_b: tuple[Cluster, Cluster],
) -> None:
    a, _ = team_a_on_b
    with pytest.raises(ValidationError) as refused:
        ask(a, [NODE, "gpu-b-only"])
    assert refused.value.message_dict == {
        "nodes": [
            f"gpu-b-only is not on cluster {a.name}: it is on cluster-b. A change is on one "
            "cluster: ask on the cluster the node is on."
        ]
    }
    assert not MigChangeRequest.objects.exists() and not NodeClaim.objects.exists()


def test_a_lead_is_never_told_of_a_cluster_none_of_their_teams_is_on(
    two_clusters: tuple[Cluster, Cluster],
) -> None:
    """lead-a's teams are on the settings' cluster only: a change naming only nodes is on
    that one, and a node of cluster-b is "no such node" there, cluster-b never named (it
    used to say "it is on cluster-b", and the choice listed every cluster's name)."""
    a, _ = two_clusters
    assert ask(None, [NODE]).cluster_id == a.pk
    with pytest.raises(ValidationError) as refused:
        ask(None, ["gpu-b-only"])
    assert refused.value.message_dict == {
        "nodes": [f"No such node on cluster {a.name} (or gone): gpu-b-only."]
    }
    assert "cluster-b" not in str(refused.value)
    assert MigChangeRequest.objects.count() == 1


def test_same_named_nodes_are_claimed_per_cluster(
    two_clusters: tuple[Cluster, Cluster],
) -> None:
    a, b = two_clusters
    on_a = ask(a, [NODE])
    assert on_a.cluster_id == a.pk
    assert list(NodeClaim.objects.values_list("cluster_id", "node", "request_id")) == [
        (a.pk, NODE, on_a.pk)
    ]
    # A's claim does not block B's node of the same name; B's assessment is B's fleet.
    on_b = ask(b, [NODE])
    assert on_b.cluster_id == b.pk and on_b.verdict != "blocked"
    assert on_b.previous_configs == {NODE: "all-1g.10gb"}
    assert on_a.previous_configs == {NODE: "all-balanced"}
    assert not any("open request" in r for r in on_b.assessment["reasons"])
    assert [e["pod"] for e in on_b.assessment["evictions"]] == ["b-pod"]
    assert sorted(NodeClaim.objects.values_list("cluster_id", "request_id")) == sorted(
        [(a.pk, on_a.pk), (b.pk, on_b.pk)]
    )
    # A second change on A's node is blocked by A's claim.
    with pytest.raises(ValidationError) as refused:
        ask(a, [NODE])
    assert f"{NODE} is already part of open request #{on_a.pk}." in refused.value.messages


def test_a_pools_change_is_on_the_pools_cluster(two_clusters: tuple[Cluster, Cluster]) -> None:
    a, b = two_clusters
    pool = NodePool.objects.create(
        cluster=b, name="train-b", node_selector={"quartermaster.io/pool": "train"}
    )
    with pytest.raises(ValidationError) as refused:
        ask(a, [], pool=pool)
    assert refused.value.message_dict == {
        "pool": [f"Pool train-b is on cluster cluster-b, not {a.name}."]
    }
    made = ask(None, [], pool=pool)
    # The pool's selector matches nodes on both clusters: only B's are taken.
    assert (made.cluster_id, sorted(made.nodes)) == (b.pk, ["gpu-a100-03", "gpu-b-only"])


def test_the_api_names_takes_and_filters_the_cluster(
    client: Client, team_a_on_b: tuple[Cluster, Cluster]
) -> None:
    a, _ = team_a_on_b
    body = {"team": "team-a", "nodes": [NODE], "target_config": "all-3g.40gb", "reason": "3g"}
    post = {"content_type": "application/json", "headers": bearer("lead-a")}
    missing = client.post("/api/v1/mig-changes/", body, **post)  # type: ignore[arg-type]
    assert missing.status_code == 400
    assert "cluster" in missing.json()["errors"], missing.json()
    unknown = client.post("/api/v1/mig-changes/", {**body, "cluster": "nowhere"}, **post)  # type: ignore[arg-type]
    assert unknown.status_code == 400 and "No such cluster" in str(unknown.json())
    made = client.post("/api/v1/mig-changes/", {**body, "cluster": "cluster-b"}, **post)  # type: ignore[arg-type]
    assert made.status_code == 201, made.json()
    assert made.json()["cluster"] == "cluster-b"
    made_a = client.post("/api/v1/mig-changes/", {**body, "cluster": a.name}, **post)  # type: ignore[arg-type]
    assert made_a.status_code == 201 and made_a.json()["cluster"] == a.name
    headers = bearer("approver")
    listed = client.get("/api/v1/mig-changes/?cluster=cluster-b", headers=headers).json()
    assert [r["id"] for r in listed["results"]] == [made.json()["id"]]
    bad = client.get("/api/v1/mig-changes/?cluster=nowhere", headers=headers)
    assert bad.status_code == 400 and "cluster" in str(bad.json())


def test_a_quota_request_is_on_its_namespaces_cluster(
    client: Client, two_clusters: tuple[Cluster, Cluster]
) -> None:
    a, b = two_clusters
    namespace = Namespace.objects.get(name="team-a")
    # A namespace of the same name on cluster-b, of the same team.
    twin = Namespace.objects.create(cluster=b, name="team-a", team=namespace.team)
    body = {
        "team": "team-a",
        "kind": "namespace",
        "namespace": "team-a",
        "resource": "requests.nvidia.com/gpu",
        "requested": "2",
        "reason": "a test run",
    }
    post = {"content_type": "application/json", "headers": bearer("lead-a")}
    ambiguous = client.post("/api/v1/quota-requests/", body, **post)  # type: ignore[arg-type]
    assert ambiguous.status_code == 400
    assert ambiguous.json()["errors"]["cluster"] == [
        f"The namespace team-a is on {', '.join(sorted([a.name, 'cluster-b']))}: say which."
    ]
    made = client.post("/api/v1/quota-requests/", {**body, "cluster": "cluster-b"}, **post)  # type: ignore[arg-type]
    assert made.status_code == 201, made.json()
    assert made.json()["cluster"] == "cluster-b"
    request = QuotaChangeRequest.objects.get(pk=made.json()["id"])
    assert (request.cluster_id, request.namespace_id) == (b.pk, twin.pk)
    # Assessed on cluster-b's fleet: its two nodes' GPUs, not the demo's.
    assert "The fleet offers 0 nvidia.com/gpu" in " ".join(request.assessment["notes"])
    listed = client.get("/api/v1/quota-requests/?cluster=cluster-b", headers=bearer("approver"))
    assert [r["id"] for r in listed.json()["results"]] == [request.pk]


def test_the_api_never_combines_a_namespace_with_another_clusters_cluster_queue(
    client: Client, two_clusters: tuple[Cluster, Cluster]
) -> None:
    """Named without a cluster, each name is found where it is: on two clusters, refused
    on the ClusterQueue, nothing saved."""
    _, b = two_clusters
    groups = [
        {
            "coveredResources": ["nvidia.com/gpu"],
            "flavors": [
                {"name": "h100", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 8}]}
            ],
        }
    ]
    cq = ClusterQueue.objects.create(cluster=b, name="cq-only-on-b", resource_groups=groups)
    team_a = Team.objects.get(slug="team-a")
    served = Namespace.objects.create(cluster=b, name="team-a-on-b", team=team_a)
    LocalQueue.objects.create(namespace=served, name="lq", cluster_queue=cq)
    body = {
        "team": "team-a",
        "kind": "queue",
        "namespace": "team-a",
        "cluster_queue": "cq-only-on-b",
        "flavor": "h100",
        "resource": "nvidia.com/gpu",
        "requested": "2",
        "reason": "a test run",
    }
    post = {"content_type": "application/json", "headers": bearer("lead-a")}
    refused = client.post("/api/v1/quota-requests/", body, **post)  # type: ignore[arg-type]
    assert refused.status_code == 400
    assert (
        "ClusterQueue cq-only-on-b is on the cluster cluster-b, namespace team-a on "
        f"{Cluster.objects.get(pk=settings_cluster_id()).name}: choose both on one cluster."
    ) in refused.json()["errors"]["cluster_queue"]
    assert not QuotaChangeRequest.objects.exists()


def test_the_executor_moves_the_queues_of_the_changes_cluster(
    two_clusters: tuple[Cluster, Cluster],
) -> None:
    a, b = two_clusters
    on_a = ClusterQueue.objects.filter(cluster=a).exclude(resource_groups=[]).first()
    assert on_a is not None
    cohort = Cohort.objects.create(cluster=b, name=on_a.cohort.name) if on_a.cohort else None
    for flavor in ResourceFlavor.objects.on(a):  # a queue names its own cluster's flavors
        ResourceFlavor.objects.create(cluster=b, name=flavor.name, node_labels=flavor.node_labels)
    twin = ClusterQueue.objects.create(
        cluster=b, name=on_a.name, cohort=cohort, resource_groups=on_a.resource_groups
    )
    (flavor, resource), amount = next(iter(on_a.quota().items()))
    change = MigChangeRequest.objects.create(
        cluster=b,
        team=Team.objects.get(slug="team-a"),
        nodes=[],
        target_config="all-3g.40gb",
        reason="queues only",
        state=MigChangeRequest.State.RUNNING,
        queue_changes=[
            {
                "cluster_queue": on_a.name,
                "flavor": flavor,
                "resource": resource,
                "from": int(amount),
                "to": int(amount) + 1,
            }
        ],
    )
    # No node to change: the queues step alone, through cluster-b's own gateway.
    assert advance(change.pk).kind == "done"
    on_a.refresh_from_db()
    twin.refresh_from_db()
    assert on_a.quota()[(flavor, resource)] == amount
    assert twin.quota()[(flavor, resource)] == amount + 1


def test_the_what_if_of_a_queue_request_reads_its_cluster_only(
    two_clusters: tuple[Cluster, Cluster],
) -> None:
    a, b = two_clusters
    on_a = ClusterQueue.objects.filter(cluster=a).exclude(resource_groups=[]).first()
    assert on_a is not None
    twin = ClusterQueue.objects.create(
        cluster=b, name=on_a.name, resource_groups=on_a.resource_groups
    )
    (_, resource), _ = next(iter(on_a.quota().items()))
    for cluster, name in ((a, "on-a"), (b, "on-b")):
        ObservedWorkload.objects.create(
            cluster=cluster,
            namespace="team-a",
            name=name,
            cluster_queue=on_a.name,
            requests={resource: "1"},
            last_changed=timezone.now(),
        )
    observed_b = observed_kueue(b.pk)
    assert [w.key for w in observed_b.workloads] == ["team-a/on-b"]
    world = kueue_world(observed_b, b.pk)
    assert [q.name for q in world.queues] == [twin.name]
    assert "team-a/on-a" in {w.key for w in observed_kueue(a.pk).workloads}
    assert "team-a/on-b" not in {w.key for w in observed_kueue(a.pk).workloads}


def test_the_what_if_names_the_workloads_of_the_readers_namespaces_on_its_cluster(
    two_clusters: tuple[Cluster, Cluster],
) -> None:
    """lead-a's team owns ``team-a`` on the settings' cluster; on cluster-b a namespace of
    that name is team-b's: its workloads are another team's there, and not named."""
    a, b = two_clusters
    on_a = ClusterQueue.objects.filter(cluster=a).exclude(resource_groups=[]).first()
    assert on_a is not None
    twin = ClusterQueue.objects.create(
        cluster=b, name=on_a.name, resource_groups=on_a.resource_groups
    )
    (_, resource), _ = next(iter(on_a.quota().items()))
    theirs = Namespace.objects.create(
        name="team-a", team=Team.objects.get(slug="team-b"), cluster=b
    )
    LocalQueue.objects.create(name="lq-b", namespace=theirs, cluster_queue=twin)
    ObservedWorkload.objects.create(
        cluster=b,
        namespace="team-a",
        name="b-secret",
        queue_name="lq-b",
        requests={resource: "100000"},
        last_changed=timezone.now(),
    )
    lead_a = User.objects.get(username="lead-a")
    shown = cluster_queue_what_if(lead_a, twin)
    assert shown["waiting"], shown
    assert "b-secret" not in str(shown)
    assert HIDDEN in {w["workload"] for w in shown["waiting"]}


def test_the_form_offers_the_chosen_clusters_nodes_and_asks_there(
    client: Client, two_clusters: tuple[Cluster, Cluster]
) -> None:
    _, b = two_clusters
    client.force_login(User.objects.get(username="lead-a"))
    hidden = client.get("/changes/new/?cluster=cluster-b").content.decode()
    assert "cluster-b" not in hidden and "Cluster B" not in hidden  # no team of theirs there
    # team-a runs on cluster-b too: a lead is offered the clusters their teams are on.
    Namespace.objects.create(name="team-a-b", team=Team.objects.get(slug="team-a"), cluster=b)
    client.force_login(User.objects.get(username="lead-a"))
    page = client.get("/changes/new/").content.decode()
    assert 'name="cluster"' in page and "gpu-b-only" not in page  # the settings' one first
    assert '<option value="cluster-b">Cluster B</option>' in page  # named as every page names it
    on_b = client.get("/changes/new/?cluster=cluster-b").content.decode()
    assert "gpu-b-only" in on_b and "now all-1g.10gb" in on_b
    response = client.post(
        "/changes/new/",
        {
            "cluster": "cluster-b",
            "team": Team.objects.get(slug="team-a").pk,
            "nodes": ["gpu-b-only"],
            "target_config": "all-3g.40gb",
            "reason": "3g on cluster-b",
        },
    )
    change = MigChangeRequest.objects.get()
    assert response.status_code == 302, response.content.decode()[:2000]
    assert (change.cluster_id, change.nodes) == (b.pk, ["gpu-b-only"])


def test_the_form_starts_on_the_cluster_the_switcher_remembers(
    client: Client, two_clusters: tuple[Cluster, Cluster]
) -> None:
    # team-a works on cluster-b too: its lead is offered that cluster
    Namespace.objects.create(
        name="team-a-on-b", team=Team.objects.get(slug="team-a"), cluster=two_clusters[1]
    )
    client.force_login(User.objects.get(username="lead-a"))
    client.get("/fleet/?cluster=cluster-b")  # the switcher's choice, kept in the session
    page = client.get("/changes/new/").content.decode()
    assert "gpu-b-only" in page
    assert '<option value="cluster-b" selected>Cluster B</option>' in page


def test_a_pools_suggestion_takes_the_pool_of_the_remembered_cluster(
    client: Client, two_clusters: tuple[Cluster, Cluster]
) -> None:
    """Two clusters each have a pool ``train``: the suggestion for the pool is the one on the
    cluster the switcher shows, with that cluster's nodes."""
    a, b = two_clusters
    on_a = NodePool.objects.on(a).get(name="train")  # the demo's
    NodePool.objects.create(
        cluster=b, name="train", node_selector={"quartermaster.io/pool": "train"}
    )
    ObservedNodeFactory(cluster=a, name="gpu-a-only", labels=dict(on_a.node_selector))
    client.force_login(User.objects.get(username="admin"))
    for shown, theirs, not_theirs in (
        (b, "gpu-b-only", "gpu-a-only"),
        (a, "gpu-a-only", "gpu-b-only"),
    ):
        client.get(f"/fleet/?cluster={shown.name}")  # the switcher's choice, kept in the session
        page = client.get("/changes/new/?pool=train").content.decode()
        assert f'<option value="{shown.name}" selected>' in page
        assert theirs in page and not_theirs not in page


def test_the_clusters_a_user_sees_follow_their_namespaces_and_roles_read_after_read(
    two_clusters: tuple[Cluster, Cluster],
) -> None:
    """Each user's read of the clusters they may see is compiled once in the process
    (``cluster.scope.clusters_read``): what it answers still follows the user's teams'
    namespaces and roles, and another user's read is their own."""
    from cluster.scope import clusters_read
    from portal.infra.round_trips import read_together
    from portal.models import PlatformRole

    a, b = two_clusters
    lead = User.objects.get(username="lead-a")

    def seen(user: User) -> list[str]:
        fresh = User.objects.get(pk=user.pk)  # a request's user: its roles not known yet
        return [c.name for c in read_together(clusters_read(fresh))[0]]

    assert seen(lead) == seen(lead) == [a.name]
    Namespace.objects.create(name="team-a-b", team=Team.objects.get(slug="team-a"), cluster=b)
    assert seen(lead) == sorted([a.name, b.name])
    outsider = User.objects.create(username="outsider")
    assert seen(outsider) == []
    PlatformRole.objects.create(user=outsider, role="approver")
    assert seen(outsider) == sorted([a.name, b.name])
    outsider._qm_roles = {"approver"}  # type: ignore[attr-defined]  # a page that read them
    assert [c.name for c in read_together(clusters_read(outsider))[0]] == sorted([a.name, b.name])
    outsider._qm_roles = set()  # type: ignore[attr-defined]
    assert [c.name for c in read_together(clusters_read(outsider))[0]] == []
