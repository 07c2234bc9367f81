"""The REST API per cluster: every cluster-scoped resource at
``/api/v1/clusters/<cluster>/…``, the flat routes still answering (across clusters, with
``cluster`` on each item and ``?cluster=``; a name on several clusters a 409 naming the
addresses to use), creations choosing their cluster, and team scope exactly as before on
both: a lead whose team is on one cluster sees nothing of the other.

The demo scenario is on the settings' cluster; a second cluster, ``gpu-b``, has a
ClusterQueue ``cq-train`` and a namespace ``team-b`` of its own (the names the demo's
cluster has too), a LocalQueue, a node pool and a node named like one of the demo's."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from cluster.models import AppliedObject, Cluster, Drift, SyncRun
from cluster.services import settings_cluster
from fleet.models import NodePool
from portal.models import AuditEvent
from queues.models import ClusterQueue, LocalQueue
from tenants.models import Namespace, Team
from tests.factories import ObservedNodeFactory, ObservedPodFactory
from tests.support import bearer, served_schema

pytestmark = pytest.mark.django_db

V1 = "/api/v1"
JSON = "application/json"


@pytest.fixture
def two(demo: None) -> dict[str, Any]:
    """The demo's cluster (``a``) and ``gpu-b`` with objects named like the demo's."""
    a = settings_cluster()
    b = Cluster.objects.create(name="gpu-b", display_name="GPU B", connection="in_cluster")
    team_b = Team.objects.get(slug="team-b")
    ns = Namespace.objects.create(name="team-b", team=team_b, cluster=b, description="on b")
    cq = ClusterQueue.objects.create(
        name="cq-train", cluster=b, description="serving on b", resource_groups=[]
    )
    LocalQueue.objects.create(name="team-b-train", namespace=ns, cluster_queue=cq)
    NodePool.objects.create(name="train", cluster=b, node_selector={"pool": "train"})
    now = timezone.now()
    for cluster, product in ((a, "NVIDIA-A100-SXM4-80GB"), (b, "NVIDIA-H100-80GB-HBM3")):
        ObservedNodeFactory(
            cluster=cluster,
            name="gpu-node-1",
            gpu_product=product,
            gpu_count=8,
            first_seen=now,
            last_changed=now,
        )
    return {"a": a.name, "b": b.name, "both": sorted([a.name, b.name])}


def results(response: Any) -> list[dict[str, Any]]:
    assert response.status_code == 200, response.content
    return response.json()["results"]  # type: ignore[no-any-return]


def test_nested_routes_give_each_cluster_its_own_object(
    client: Client, two: dict[str, Any]
) -> None:
    admin = bearer("admin")
    a, b = two["a"], two["b"]
    on_a = client.get(f"{V1}/clusters/{a}/cluster-queues/cq-train/", headers=admin).json()
    on_b = client.get(f"{V1}/clusters/{b}/cluster-queues/cq-train/", headers=admin).json()
    assert (on_a["cluster"], on_b["cluster"]) == (a, b)
    assert on_b["description"] == "serving on b" != on_a["description"]
    assert on_a["resource_groups"] and on_b["resource_groups"] == []
    ns_b = client.get(f"{V1}/clusters/{b}/namespaces/team-b/", headers=admin).json()
    ns_a = client.get(f"{V1}/clusters/{a}/namespaces/team-b/", headers=admin).json()
    assert (ns_a["cluster"], ns_b["cluster"], ns_b["description"]) == (a, b, "on b")
    assert ns_b["quota"] == {} and ns_a["quota"]
    assert [
        q["cluster"] for q in results(client.get(f"{V1}/clusters/{b}/local-queues/", headers=admin))
    ] == [b]
    assert [
        n["name"] for n in results(client.get(f"{V1}/clusters/{b}/namespaces/", headers=admin))
    ] == ["team-b"]
    node = client.get(f"{V1}/clusters/{b}/nodes/gpu-node-1/", headers=admin).json()
    assert (node["cluster"], node["gpu_product"]) == (b, "NVIDIA-H100-80GB-HBM3")
    pools = results(client.get(f"{V1}/clusters/{b}/node-pools/", headers=admin))
    assert [(p["name"], p["cluster"]) for p in pools] == [("train", b)]
    configs = client.get(f"{V1}/clusters/{a}/mig-configs/?node=gpu-node-1", headers=admin)
    assert configs.status_code == 200 and configs.json()["model"]
    # A cluster no one registered: 404, in the API's format.
    missing = client.get(f"{V1}/clusters/nope/cluster-queues/", headers=admin)
    assert (missing.status_code, missing.json()["code"]) == (404, "not_found")


def test_a_flat_detail_of_a_name_on_two_clusters_is_a_409_naming_both_addresses(
    client: Client, two: dict[str, Any]
) -> None:
    admin = bearer("admin")
    a, b = two["a"], two["b"]
    for path, kind in (
        ("cluster-queues/cq-train/", "ClusterQueue"),
        ("namespaces/team-b/", "namespace"),
        ("nodes/gpu-node-1/", "node"),
        ("node-pools/train/", "node pool"),
    ):
        answer = client.get(f"{V1}/{path}", headers=admin)
        assert answer.status_code == 409, path
        body = answer.json()
        assert body["code"] == "ambiguous"
        assert body["detail"] == (
            f"The clusters {a}, {b} each have a {kind} {path.split('/')[1]}: use the address "
            f"with its cluster, {V1}/clusters/{a}/{path} or {V1}/clusters/{b}/{path}."
        )
    # A write to the ambiguous name is refused the same way, and changes nothing.
    quotas = client.put(
        f"{V1}/cluster-queues/cq-train/quotas/",
        {"resource_groups": [], "dry_run": True},
        content_type=JSON,
        headers=admin,
    )
    assert quotas.status_code == 409
    assert f"{V1}/clusters/{b}/cluster-queues/cq-train/quotas/" in quotas.json()["detail"]
    configs = client.get(f"{V1}/mig-configs/?node=gpu-node-1", headers=admin)
    assert configs.status_code == 409
    assert f"{V1}/clusters/{b}/mig-configs/?node=gpu-node-1" in configs.json()["detail"]
    # A name on one cluster only still answers on the flat route.
    assert client.get(f"{V1}/cluster-queues/cq-dev/", headers=admin).json()["cluster"] == a
    assert client.get(f"{V1}/namespaces/team-a/", headers=admin).json()["cluster"] == a


def test_flat_lists_answer_across_clusters_and_filter_by_cluster(
    client: Client, two: dict[str, Any]
) -> None:
    admin = bearer("admin")
    a, b = two["a"], two["b"]
    every = results(client.get(f"{V1}/cluster-queues/", headers=admin))
    assert sorted(q["cluster"] for q in every if q["name"] == "cq-train") == two["both"]
    only_b = results(client.get(f"{V1}/cluster-queues/?cluster={b}", headers=admin))
    assert [(q["name"], q["cluster"]) for q in only_b] == [("cq-train", b)]
    namespaces = results(client.get(f"{V1}/namespaces/?team=team-b", headers=admin))
    assert sorted(n["cluster"] for n in namespaces) == two["both"]
    on_a = results(client.get(f"{V1}/namespaces/?cluster={a}", headers=admin))
    assert {n["cluster"] for n in on_a} == {a} and "team-a" in [n["name"] for n in on_a]
    for path in ("local-queues", "nodes", "node-pools", "cohorts", "resource-flavors"):
        listed = results(client.get(f"{V1}/{path}/?cluster={b}", headers=admin))
        assert {item["cluster"] for item in listed} <= {b}, path
    assert len(results(client.get(f"{V1}/nodes/", headers=admin))) == 2
    for path in ("cluster-queues", "namespaces", "nodes", "mig-changes", "quota-requests"):
        refused = client.get(f"{V1}/{path}/?cluster=nope", headers=admin)
        assert (refused.status_code, refused.json()["errors"]) == (
            400,
            {"cluster": [f"No such cluster: use one of {a}, {b}."]},
        ), path
    for path in ("drift", "gpu-health"):
        refused = client.get(f"{V1}/{path}/?cluster=nope", headers=admin)
        assert refused.status_code == 400 and list(refused.json()["errors"]) == ["cluster"]


def test_drift_is_listed_per_cluster(client: Client, two: dict[str, Any]) -> None:
    admin = bearer("admin")
    a, b = two["a"], two["b"]
    now = timezone.now()
    for name in (a, b):
        Drift.objects.create(
            cluster=Cluster.objects.get(name=name),
            kind=Drift.Kind.MIG_LAYOUT,
            subject="gpu-node-1",
            field="nvidia.com/mig.config",
            desired="all-3g.40gb",
            observed="all-balanced",
            first_seen=now,
            last_seen=now,
        )
    every = client.get(f"{V1}/drift/", headers=admin).json()
    assert sorted(d["cluster"] for d in every if d["subject"] == "gpu-node-1") == two["both"]
    nested = client.get(f"{V1}/clusters/{b}/drift/", headers=admin).json()
    assert [(d["cluster"], d["subject"]) for d in nested] == [(b, "gpu-node-1")]
    assert client.get(f"{V1}/drift/?cluster={b}", headers=admin).json() == nested


def pending(cluster: str, namespace: str, name: str) -> None:
    """A Pending pod as the poll of ``cluster`` records it."""
    ObservedPodFactory(
        cluster=Cluster.objects.get(name=cluster), namespace=namespace, name=name, phase="Pending"
    )


def waiting(client: Client, path: str, user: str) -> list[tuple[str, str, str]]:
    """(cluster, namespace, name) of the test's pods (``t-…``) that ``path`` says wait."""
    answer = client.get(path, headers=bearer(user))
    assert answer.status_code == 200, answer.content
    return sorted(
        (r["cluster"], r["namespace"], r["name"]) for r in answer.json() if r["name"][:2] == "t-"
    )


def test_waiting_is_answered_per_cluster_and_in_the_teams_scope(
    client: Client, two: dict[str, Any]
) -> None:
    """team-b has a namespace team-b on both clusters, team-a one on the demo's only; a
    namespace ``shared`` is team-a's on the demo's cluster, team-b's on gpu-b."""
    a, b = two["a"], two["b"]
    Namespace.objects.create(
        name="shared", team=Team.objects.get(slug="team-a"), cluster=Cluster.objects.get(name=a)
    )
    Namespace.objects.create(
        name="shared", team=Team.objects.get(slug="team-b"), cluster=Cluster.objects.get(name=b)
    )
    for cluster, namespace in ((a, "team-a"), (a, "team-b"), (b, "team-b"), (b, "shared")):
        pending(cluster, namespace, f"t-{namespace}-on-{cluster}")
    every = [
        (a, "team-a", f"t-team-a-on-{a}"),
        (a, "team-b", f"t-team-b-on-{a}"),
        (b, "shared", f"t-shared-on-{b}"),
        (b, "team-b", f"t-team-b-on-{b}"),
    ]
    # Flat: across clusters, each row naming its cluster; ?cluster= keeps one.
    assert waiting(client, f"{V1}/waiting/", "admin") == every
    on_b = [row for row in every if row[0] == b]
    assert waiting(client, f"{V1}/clusters/{b}/waiting/", "admin") == on_b
    assert waiting(client, f"{V1}/waiting/?cluster={b}", "admin") == on_b
    assert waiting(client, f"{V1}/clusters/{a}/waiting/", "admin") == every[:2]
    assert waiting(client, f"{V1}/clusters/{b}/waiting/?namespace=team-b", "admin") == on_b[1:]
    # The permission matrix: a lead sees their teams' namespaces on each cluster, never a
    # namespace of the same name that is another team's there.
    assert waiting(client, f"{V1}/waiting/", "lead-a") == every[:1]
    assert waiting(client, f"{V1}/clusters/{a}/waiting/", "lead-a") == every[:1]
    assert client.get(f"{V1}/clusters/{b}/waiting/", headers=bearer("lead-a")).json() == {
        "detail": f"No cluster named '{b}'.",  # no team of lead-a's is on b: none to them
        "code": "not_found",
        "clusters": [],
    }
    assert waiting(client, f"{V1}/waiting/", "lead-b") == every[1:]
    assert waiting(client, f"{V1}/clusters/{a}/waiting/", "lead-b") == every[1:2]
    assert waiting(client, f"{V1}/clusters/{b}/waiting/", "lead-b") == on_b
    # A cluster none of their teams is on: a 400 naming `cluster` and only the ones they see.
    for path in (f"waiting/?cluster={b}&namespace=team-a",):
        refused = client.get(f"{V1}/{path}", headers=bearer("lead-a"))
        assert refused.status_code == 400, path
        assert refused.json()["errors"] == {"cluster": [f"No such cluster: use one of {a}."]}
    assert client.get(f"{V1}/clusters/{b}/waiting/").status_code == 401


def test_the_sync_status_is_answered_per_cluster(client: Client, two: dict[str, Any]) -> None:
    a, b = two["a"], two["b"]
    now = timezone.now()
    for name, nodes in ((a, 3), (b, 5)):
        cluster = Cluster.objects.get(name=name)
        SyncRun.objects.create(cluster=cluster, started_at=now, finished_at=now, nodes=nodes)
        AppliedObject.objects.create(
            cluster=cluster,
            api_version="v1",
            kind="ResourceQuota",
            namespace="team-b",
            name="t-quota",
            outcome=AppliedObject.Outcome.FAILED,
            message=f"refused by {name}",
            warnings=[f"warned by {name}"],
        )
    admin = bearer("admin")

    def mine(status: dict[str, Any]) -> tuple[list[Any], list[Any]]:
        problems = [
            (p["cluster"], p["message"]) for p in status["not_applied"] if p["name"] == "t-quota"
        ]
        warned = [
            (w["cluster"], w["warnings"]) for w in status["warnings"] if w["name"] == "t-quota"
        ]
        return problems, warned

    flat = client.get(f"{V1}/sync-status/", headers=admin).json()
    assert (flat["cluster"], flat["last_sync"]["nodes"]) == (a, 3)  # the settings' cluster
    assert [(c["cluster"], c["last_sync"]["nodes"]) for c in flat["clusters"]] == [(a, 3), (b, 5)]
    assert mine(flat) == (
        [(a, f"refused by {a}"), (b, f"refused by {b}")],
        [(a, [f"warned by {a}"]), (b, [f"warned by {b}"])],
    )
    nested = client.get(f"{V1}/clusters/{b}/sync-status/", headers=admin).json()
    assert (nested["cluster"], nested["api"]["state"], nested["last_sync"]["nodes"]) == (b, "ok", 5)
    assert [c["cluster"] for c in nested["clusters"]] == [b]
    assert mine(nested) == ([(b, f"refused by {b}")], [(b, [f"warned by {b}"])])
    assert {c["cluster"] for c in nested["not_applied"] + nested["warnings"]} == {b}
    assert client.get(f"{V1}/sync-status/?cluster={b}", headers=admin).json() == nested
    assert (flat["not_applied_elsewhere"], flat["warnings_elsewhere"]) == (0, 0)
    # a lead of team-a reads team-b's objects counted, never named
    lead = client.get(f"{V1}/sync-status/", headers=bearer("lead-a")).json()
    assert mine(lead) == ([], [])
    assert all(p["namespace"] != "team-b" for p in lead["not_applied"] + lead["warnings"])
    assert (lead["not_applied_elsewhere"], lead["warnings_elsewhere"]) == (2, 2)


def test_an_unknown_cluster_is_a_404_naming_the_clusters_the_caller_may_know(
    client: Client, two: dict[str, Any]
) -> None:
    """Platform admins, who list the clusters (``GET /api/v1/clusters/``), are told their
    names; anyone else that there is no such cluster, as every nested route answers."""
    for path in ("namespaces/", "waiting/", "sync-status/", "nodes/gpu-node-1/", "drift/"):
        for user, names in (("admin", two["both"]), ("lead-a", [])):
            answer = client.get(f"{V1}/clusters/nope/{path}", headers=bearer(user))
            assert answer.status_code == 404, (path, user)
            assert answer.json() == {
                "detail": "No cluster named 'nope'.",
                "code": "not_found",
                "clusters": names,
            }, (path, user)
        assert client.get(f"{V1}/clusters/nope/{path}").status_code == 401
    # Not a write either: the cluster is looked up before the body.
    refused = client.post(
        f"{V1}/clusters/nope/namespaces/",
        {"name": "x", "team": "team-a"},
        content_type=JSON,
        headers=bearer("admin"),
    )
    assert (refused.status_code, refused.json()["clusters"]) == (404, two["both"])
    assert not Namespace.objects.filter(name="x").exists()


def test_a_create_without_a_cluster_needs_one_when_there_are_two(
    client: Client, two: dict[str, Any]
) -> None:
    admin = bearer("admin")
    a, b = two["a"], two["b"]
    body = {"name": "team-a-extra", "team": "team-a"}
    refused = client.post(f"{V1}/namespaces/", body, content_type=JSON, headers=admin)
    assert (refused.status_code, refused.json()["errors"]) == (
        400,
        {"cluster": [f"Choose the cluster: {a}, {b}."]},
    )
    unknown = client.post(
        f"{V1}/namespaces/", {**body, "cluster": "nope"}, content_type=JSON, headers=admin
    )
    assert unknown.json()["errors"] == {"cluster": [f"No such cluster: use one of {a}, {b}."]}
    assert not Namespace.objects.filter(name="team-a-extra").exists()

    made = client.post(
        f"{V1}/namespaces/", {**body, "cluster": b}, content_type=JSON, headers=admin
    )
    assert (made.status_code, made.json()["cluster"]) == (201, b)
    nested = client.post(f"{V1}/clusters/{a}/namespaces/", body, content_type=JSON, headers=admin)
    assert (nested.status_code, nested.json()["cluster"]) == (201, a)
    assert (
        sorted(
            Namespace.objects.filter(name="team-a-extra").values_list("cluster__name", flat=True)
        )
        == two["both"]
    )
    assert AuditEvent.objects.filter(event="namespace.created", source="api").count() == 2
    # Taken on that cluster: the error names it; a body naming another cluster than the path's.
    taken = client.post(f"{V1}/clusters/{b}/namespaces/", body, content_type=JSON, headers=admin)
    assert taken.json()["errors"] == {
        "name": [f"The cluster {b} already has a namespace team-a-extra."]
    }
    other = client.post(
        f"{V1}/clusters/{b}/namespaces/",
        {**body, "name": "n2", "cluster": a},
        content_type=JSON,
        headers=admin,
    )
    assert other.json()["errors"] == {"cluster": [f"The path says cluster {b}; leave cluster out."]}


def test_a_create_without_a_cluster_goes_to_the_only_one(client: Client, demo: None) -> None:
    made = client.post(
        f"{V1}/namespaces/",
        {"name": "team-a-extra", "team": "team-a"},
        content_type=JSON,
        headers=bearer("admin"),
    )
    assert (made.status_code, made.json()["cluster"]) == (201, settings_cluster().name)


def test_a_write_never_moves_an_object_to_another_cluster(
    client: Client, two: dict[str, Any]
) -> None:
    admin = bearer("admin")
    a, b = two["a"], two["b"]
    url = f"{V1}/clusters/{b}/namespaces/team-b/"
    moved = client.patch(url, {"cluster": a}, content_type=JSON, headers=admin)
    assert (moved.status_code, moved.json()["errors"]) == (
        400,
        {"cluster": [f"The namespace team-b is on cluster {b}; its cluster cannot be changed."]},
    )
    quota = client.put(
        url + "quota/", {"cluster": a, "hard": {"pods": "5"}}, content_type=JSON, headers=admin
    )
    assert quota.status_code == 400 and list(quota.json()["errors"]) == ["cluster"]
    queue = client.put(
        f"{V1}/clusters/{b}/cluster-queues/cq-train/quotas/",
        {"cluster": a, "resource_groups": []},
        content_type=JSON,
        headers=admin,
    )
    assert queue.status_code == 400 and list(queue.json()["errors"]) == ["cluster"]
    ns = Namespace.objects.get(cluster__name=b, name="team-b")
    assert (ns.description, list(ns.quota_items.all())) == ("on b", [])
    # Its own cluster may be repeated; the description changes, audited.
    kept = client.patch(
        url, {"cluster": b, "description": "on b, changed"}, content_type=JSON, headers=admin
    )
    assert (kept.status_code, kept.json()["description"]) == (200, "on b, changed")
    assert Namespace.objects.get(cluster__name=a, name="team-b").description != "on b, changed"
    assert AuditEvent.objects.filter(event="namespace.changed", source="api").exists()


def test_a_lead_whose_team_is_on_one_cluster_sees_nothing_of_the_other(
    client: Client, two: dict[str, Any]
) -> None:
    """lead-a's team-a has namespaces on the demo's cluster only; lead-b's team-b on both.
    The other cluster's nested routes answer lead-a as a cluster that does not exist (its
    name is not theirs to learn); flat, its team-scoped rows are not found (404), lists
    empty, and the flat lists across clusters hold the clusters they see only; writes stay the
    admins' (403)."""
    lead_a, lead_b = bearer("lead-a"), bearer("lead-b")
    a, b = two["a"], two["b"]
    nested_b = f"{V1}/clusters/{b}"
    # Reads: nested (no such cluster) and flat.
    for path in ("namespaces/", "local-queues/", "cluster-queues/cq-train/", "nodes/"):
        for cluster in (b, "nope"):
            answer = client.get(f"{V1}/clusters/{cluster}/{path}", headers=lead_a)
            assert (answer.status_code, answer.json()) == (
                404,
                {"detail": f"No cluster named '{cluster}'.", "code": "not_found", "clusters": []},
            ), (path, cluster)
    # Flat, ?cluster= of the cluster they may not see is answered as one there is not, and
    # the lists across clusters hold the clusters they see only.
    for path in ("namespaces/", "local-queues/", "nodes/", "drift/", "waiting/"):
        hidden = client.get(f"{V1}/{path}?cluster={b}", headers=lead_a)
        unknown = client.get(f"{V1}/{path}?cluster=nope", headers=lead_a)
        assert hidden.status_code == unknown.status_code == 400, (path, hidden.content)
        assert b not in hidden.content.decode(), path
    every = client.get(f"{V1}/nodes/", headers=lead_a)
    assert every.status_code == 200 and b not in every.content.decode()
    assert client.get(f"{nested_b}/namespaces/team-b/", headers=lead_a).status_code == 404
    assert client.get(f"{V1}/clusters/{a}/namespaces/team-a/", headers=lead_a).status_code == 200
    # The flat name is on two clusters, but only one of them is lead-a's to see: a 404 (no
    # 409 telling of the other team's namespaces); for lead-b, whose team has both, a 409.
    assert client.get(f"{V1}/namespaces/team-b/", headers=lead_a).status_code == 404
    assert client.get(f"{V1}/namespaces/team-b/", headers=lead_b).status_code == 409
    assert client.get(f"{nested_b}/namespaces/team-b/", headers=lead_b).json()["cluster"] == b
    assert [
        n["cluster"] for n in results(client.get(f"{nested_b}/namespaces/", headers=lead_b))
    ] == [b]
    assert client.get(f"{nested_b}/cluster-queues/cq-train/", headers=lead_b).status_code == 200
    # Writes: another team's namespace is not found; a lead's own is refused (admins only).
    for lead, status in ((lead_a, 404), (lead_b, 403)):
        assert (
            client.put(
                f"{nested_b}/namespaces/team-b/quota/",
                {"hard": {"pods": "5"}},
                content_type=JSON,
                headers=lead,
            ).status_code
            == status
        )
        assert (
            client.patch(
                f"{nested_b}/namespaces/team-b/",
                {"description": "x"},
                content_type=JSON,
                headers=lead,
            ).status_code
            == status
        )
        assert (
            client.delete(
                f"{nested_b}/namespaces/team-b/", headers={**lead, "If-Match": "*"}
            ).status_code
            == status
        )
    # A name on two clusters, each time another team's: each lead answered their own.
    Namespace.objects.create(
        name="shared", team=Team.objects.get(slug="team-a"), cluster=Cluster.objects.get(name=a)
    )
    Namespace.objects.create(
        name="shared", team=Team.objects.get(slug="team-b"), cluster=Cluster.objects.get(name=b)
    )
    for lead, cluster in ((lead_a, a), (lead_b, b)):
        assert client.get(f"{V1}/namespaces/shared/", headers=lead).json()["cluster"] == cluster
    assert client.get(f"{V1}/namespaces/shared/", headers=bearer("admin")).status_code == 409
    # Flat writes: lead-a finds no team-b namespace; lead-b's name is on two clusters.
    flat_quota = f"{V1}/namespaces/team-b/quota/"
    for lead, status in ((lead_a, 404), (lead_b, 409)):
        answer = client.put(flat_quota, {"hard": {"pods": "5"}}, content_type=JSON, headers=lead)
        assert answer.status_code == status
    for lead, status in ((lead_a, 404), (lead_b, 403)):
        created = client.post(
            f"{nested_b}/namespaces/",
            {"name": "mine", "team": "team-a"},
            content_type=JSON,
            headers=lead,
        )
        assert created.status_code == status
        assert (
            client.put(
                f"{nested_b}/cluster-queues/cq-train/quotas/",
                {"resource_groups": []},
                content_type=JSON,
                headers=lead,
            ).status_code
            == status
        )
    assert client.get(f"{nested_b}/manifests/?team=team-a", headers=lead_a).status_code == 404
    assert client.get(f"{nested_b}/manifests/?team=team-b", headers=lead_b).status_code == 200
    assert Namespace.objects.get(cluster__name=b, name="team-b").description == "on b"
    assert not Namespace.objects.filter(name="mine").exists()


def test_lists_ask_the_same_queries_however_many_clusters_and_rows(
    client: Client, two: dict[str, Any]
) -> None:
    admin = bearer("admin")
    team_b = Team.objects.get(slug="team-b")

    def queries(path: str) -> int:
        with CaptureQueriesContext(connection) as captured:
            assert client.get(path, headers=admin).status_code == 200
        return len(captured)

    paths = (
        "namespaces",
        "cluster-queues",
        "local-queues",
        "nodes",
        "node-pools",
        "cohorts",
        "waiting",
        "sync-status",
    )
    queries(f"{V1}/teams/")  # the token's first use is recorded once
    before = {path: queries(f"{V1}/{path}/") for path in paths}
    now = timezone.now()
    for i in range(3):
        cluster = Cluster.objects.create(
            name=f"c{i}", display_name=f"C{i}", connection="in_cluster"
        )
        ns = Namespace.objects.create(name=f"n{i}", team=team_b, cluster=cluster)
        cq = ClusterQueue.objects.create(name=f"q{i}", cluster=cluster, resource_groups=[])
        LocalQueue.objects.create(name=f"l{i}", namespace=ns, cluster_queue=cq)
        NodePool.objects.create(name=f"p{i}", cluster=cluster, node_selector={"pool": "x"})
        ObservedNodeFactory(cluster=cluster, name=f"node-{i}", first_seen=now, last_changed=now)
    assert {path: queries(f"{V1}/{path}/") for path in paths} == before


def test_the_schema_describes_the_nested_routes_and_the_cluster_field_and_filter(
    client: Client, two: dict[str, Any]
) -> None:
    schema = served_schema(client)
    paths, components = schema["paths"], schema["components"]["schemas"]
    for path in (
        "/api/v1/clusters/{cluster}/namespaces/{name}/quota/",
        "/api/v1/clusters/{cluster}/cluster-queues/{name}/quotas/",
        "/api/v1/clusters/{cluster}/local-queues/",
        "/api/v1/clusters/{cluster}/nodes/{name}/",
        "/api/v1/clusters/{cluster}/drift/",
        "/api/v1/clusters/{cluster}/waiting/",
        "/api/v1/clusters/{cluster}/sync-status/",
    ):
        operation = next(iter(paths[path].values()))
        where = {(p["in"], p["name"]): p for p in operation["parameters"]}
        assert where[("path", "cluster")]["schema"]["type"] == "string", path
        assert ("query", "cluster") not in where, path
    flat = {p["name"]: p for p in paths["/api/v1/cluster-queues/"]["get"]["parameters"]}
    assert "cluster" in flat["cluster"]["description"]
    for name in ("ClusterQueue", "Namespace", "LocalQueue", "Node", "NodePool"):
        assert components[name]["properties"]["cluster"]["readOnly"] is True, name
    assert "cluster" in components["NamespaceCreateRequest"]["properties"]
    assert "409" in paths["/api/v1/namespaces/{name}/"]["get"]["responses"]
    for flat_path, item in (
        ("/api/v1/waiting/", "Waiting"),
        ("/api/v1/sync-status/", "NotApplied"),
    ):
        names = {p["name"] for p in paths[flat_path]["get"]["parameters"]}
        assert "cluster" in names, flat_path
        assert components[item]["properties"]["cluster"]["readOnly"] is True, item
    missing = paths["/api/v1/clusters/{cluster}/waiting/"]["get"]["responses"]["404"]
    assert missing["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/Error"
    }
    assert components["Error"]["properties"]["clusters"]["type"] == "array"


def test_a_lead_is_told_only_the_clusters_of_their_teams_and_no_address(
    client: Client, two: dict[str, Any]
) -> None:
    """Field errors name the clusters the caller may know of (a lead: those of their
    teams' namespaces; the cluster list itself is the admins'), and the sync status keeps
    the API server's address and raw error for platform admins."""
    a, b = two["a"], two["b"]
    lead, admin = bearer("lead-a"), bearer("admin")
    for path in ("nodes/", "sync-status/", "mig-changes/"):
        refused = client.get(f"{V1}/{path}?cluster=nope", headers=lead)
        assert refused.json()["errors"] == {"cluster": [f"No such cluster: use one of {a}."]}
        refused = client.get(f"{V1}/{path}?cluster=nope", headers=admin)
        assert refused.json()["errors"] == {"cluster": [f"No such cluster: use one of {a}, {b}."]}
    preview = client.post(
        f"{V1}/mig-changes/preview/",
        {"nodes": ["gpu-node-1"], "target_config": "all-1g.10gb", "cluster": "nope"},
        content_type=JSON,
        headers=lead,
    )
    assert preview.json()["errors"] == {"cluster": [f"No such cluster: use one of {a}."]}
    error = "cannot reach the Kubernetes API at https://10.9.8.7:6443: connection refused"
    started = timezone.now()
    for cluster in Cluster.objects.filter(name__in=[a, b]):
        SyncRun.objects.create(cluster=cluster, started_at=started, error=error)
    said = client.get(f"{V1}/sync-status/", headers=lead).content.decode()
    assert "10.9.8.7" not in said and b not in said
    status = client.get(f"{V1}/sync-status/", headers=lead).json()
    assert [c["cluster"] for c in status["clusters"]] == [a]
    assert status["last_sync"]["error"] == "not reachable (platform admins see why)"
    full = client.get(f"{V1}/sync-status/", headers=admin).json()
    assert [c["cluster"] for c in full["clusters"]] == [a, b]
    assert full["last_sync"]["error"] == error
    # the pages likewise: why an API is unreachable is the admins' to read
    for name, shown in (("lead-a", False), ("admin", True)):
        page_client = Client()
        page_client.force_login(User.objects.get(username=name))
        for page in ("/", "/fleet/"):
            body = page_client.get(page).content.decode()
            assert "unreachable since" in body, (name, page)
            assert ("10.9.8.7" in body) is shown, (name, page)
