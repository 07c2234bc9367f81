"""Two clusters with the same names and different facts: each cluster's waiting work is
explained, linked, estimated and planned on its own cluster's nodes, queues and gangs.

Both clusters have node ``gpu-node-a`` in pool ``train`` (intended ``all-3g.40gb``),
namespace ``team-a`` with LocalQueue ``team-a-train`` into ClusterQueue ``cq-train``, a
Pending pod ``train-0`` asking for one 3g.40gb slice, a gang ``gang-1``, and workloads
``job-quiet`` (Kueue wrote no reason) and ``job-big`` (8 GPUs). The facts differ:

- ``default``: ``gpu-node-a`` drifted to ``all-1g.10gb`` (no 3g.40gb slice at all); the
  gang needs 2 pods and none runs; ``cq-train`` promises 4 GPUs; Kueue counts 3 pending;
  ``cq-train`` ran work here (run times to learn from).
- ``inference``: ``gpu-node-a`` on its pool's layout, its 16 slices all in use (full, no
  drift); the gang needs 4 pods and 2 run; ``cq-train`` promises 16 GPUs; 7 pending; no
  run of ``cq-train`` finished here yet.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from changes.planning import gather
from cluster.models import Cluster, Drift, ObservedObject, ObservedPodGroup, ObservedWorkload
from cluster.scope import settings_cluster
from fleet.models import NodePool
from tests.factories import (
    ClusterQueueFactory,
    LocalQueueFactory,
    NamespaceFactory,
    ObservedNodeFactory,
    ObservedPodFactory,
    ResourceFlavorFactory,
)
from tests.support import explained, written
from usage.models import WorkloadRecord

pytestmark = pytest.mark.django_db
G3, G1, GPU = "nvidia.com/mig-3g.40gb", "nvidia.com/mig-1g.10gb", "nvidia.com/gpu"
SHORT = f"0/1 nodes are available: 1 Insufficient {G3}."


def _one_cluster(cluster: Any, team: Any, facts: dict[str, Any]) -> None:
    """The names both clusters share, with this cluster's ``facts``."""
    now = timezone.now()
    NodePool.objects.create(
        cluster=cluster, name="train", node_selector={"pool": "train"}, mig_config="all-3g.40gb"
    )
    ObservedNodeFactory(
        cluster=cluster,
        name="gpu-node-a",
        mig_config=facts["config"],
        labels={
            "pool": "train",
            "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB",
            "nvidia.com/mig.config": facts["config"],
        },
        allocatable=facts["offers"],
        allocated=facts["used"],
    )
    namespace = NamespaceFactory(cluster=cluster, name="team-a", team=team)
    ResourceFlavorFactory(cluster=cluster, name="h100", node_labels={"pool": "train"})
    cq = ClusterQueueFactory(
        cluster=cluster,
        name="cq-train",
        resource_groups=[
            {
                "coveredResources": [GPU],
                "flavors": [
                    {"name": "h100", "resources": [{"name": GPU, "nominalQuota": facts["quota"]}]}
                ],
            }
        ],
    )
    LocalQueueFactory(name="team-a-train", namespace=namespace, cluster_queue=cq)
    ObservedObject.objects.create(
        cluster=cluster,
        api_version="kueue.x-k8s.io/v1beta2",
        kind="ClusterQueue",
        name="cq-train",
        status={"pendingWorkloads": facts["pending"]},
        last_seen=now,
    )
    ObservedPodFactory(
        cluster=cluster,
        name="train-0",
        phase="Pending",
        gpu_requests={G3: 1},
        pending_reason="Unschedulable",
        pending_message=SHORT,
    )
    ObservedPodGroup.objects.create(
        cluster=cluster,
        namespace="team-a",
        name="gang-1",
        queue="default",
        min_member=facts["gang"],
        last_changed=now,
    )
    for i in range(facts["gang"]):
        ObservedPodFactory(
            cluster=cluster,
            name=f"gang-1-{i}",
            group_name="gang-1",
            phase="Running" if i < facts["gang_running"] else "Pending",
            gpu_requests={GPU: 1},
        )
    for name, gpus in (("job-quiet", 1), ("job-big", 8)):
        ObservedWorkload.objects.create(
            cluster=cluster,
            namespace="team-a",
            name=name,
            queue_name="team-a-train",
            cluster_queue="cq-train",
            requests={GPU: gpus},
            created_at=now - dt.timedelta(minutes=30),
            last_changed=now,
        )


@pytest.fixture
def clusters(team_a: Any) -> tuple[Any, Any]:
    default = settings_cluster()
    inference = Cluster.objects.create(
        name="inference", display_name="Inference", connection="token"
    )
    _one_cluster(
        default,
        team_a,
        {
            "config": "all-1g.10gb",
            "offers": {G1: "56"},
            "used": {},
            "quota": "4",
            "pending": 3,
            "gang": 2,
            "gang_running": 0,
        },
    )
    now = timezone.now()
    Drift.objects.create(
        cluster=default,
        kind="mig_layout",
        subject="gpu-node-a",
        field="nvidia.com/mig.config",
        desired="all-3g.40gb",
        observed="all-1g.10gb",
        first_seen=now,
        last_seen=now,
    )
    WorkloadRecord.objects.bulk_create(  # cq-train ran work on this cluster only
        WorkloadRecord(
            cluster=default,
            namespace="team-a",
            name=f"done-{i}",
            cluster_queue="cq-train",
            created_at=now - dt.timedelta(days=2, minutes=i),
            admitted_at=now - dt.timedelta(days=2, minutes=i),
            finished_at=now - dt.timedelta(days=2, minutes=i - 20),
        )
        for i in range(5)
    )
    _one_cluster(
        inference,
        team_a,
        {
            "config": "all-3g.40gb",
            "offers": {G3: "16"},
            "used": {G3: 16},
            "quota": "16",
            "pending": 7,
            "gang": 4,
            "gang_running": 2,
        },
    )
    return default, inference


def _explained(cluster: Any) -> dict[str, Any]:
    """Each waiting item's name -> the item, explained on ``cluster``."""
    workloads, pods, _ = explained(["team-a"], cluster.pk)
    return {item.name: item for item in [*workloads, *pods]}


def test_the_pending_pod_is_explained_on_its_own_cluster_with_its_fix_link(
    clusters: tuple[Any, Any],
) -> None:
    default, inference = clusters
    here = _explained(default)["train-0"].why
    assert "gpu-node-a would offer 16 more but was changed to all-1g.10gb" in here.cause
    assert here.action == {
        "label": "Ask for a MIG change",
        "url": "/changes/new/?cluster=default&nodes=gpu-node-a&target_config=all-3g.40gb",
    }
    there = _explained(inference)["train-0"].why
    assert there.cause == "All 16 mig-3g.40gb in the fleet are in use (0 free, the pod needs 1)."
    assert there.action is None  # its own node is on its pool's layout: nothing to fix


def test_gangs_are_counted_on_their_own_cluster(clusters: tuple[Any, Any]) -> None:
    default, inference = clusters
    here = _explained(default)["gang-1-0"].why
    assert here.cause == "Gang gang-1 waits until all 2 of its pods can start together."
    there = _explained(inference)["gang-1-3"].why
    assert there.cause.startswith(
        "Only part of gang gang-1 is placed: 2 of the 4 pods it needs together run"
    )
    assert "2 wait" in there.cause


def test_queue_status_is_read_on_its_own_cluster(clusters: tuple[Any, Any]) -> None:
    default, inference = clusters
    assert "one of 3 pending workloads in ClusterQueue cq-train" in (
        _explained(default)["job-quiet"].why.cause
    )
    assert "one of 7 pending workloads in ClusterQueue cq-train" in (
        _explained(inference)["job-quiet"].why.cause
    )


def test_estimates_count_their_own_clusters_queue(clusters: tuple[Any, Any]) -> None:
    default, inference = clusters
    here = _explained(default)["job-big"].estimate
    assert here.basis == (
        "it can never fit because it asks for 8 nvidia.com/gpu and cq-train can hold at most "
        "4, borrowing included"
    )
    there = _explained(inference)["job-big"].estimate  # 16 there: it fits, and waits
    assert there.basis == (
        "no workload of cq-train or namespace team-a has finished yet to learn run times from"
    )


def test_the_api_explains_each_namespace_on_its_cluster(
    client: Client, team_a_admin: Any, clusters: tuple[Any, Any]
) -> None:
    client.force_login(team_a_admin)
    written()
    rows = client.get("/api/v1/waiting/").json()
    pods = {r["cluster"]: r for r in rows if r["name"] == "train-0"}
    assert set(pods) == {"default", "inference"}
    assert pods["default"]["action"]["url"].startswith("/changes/new/?cluster=default&")
    assert pods["inference"]["action"] is None
    written()
    only = client.get("/api/v1/waiting/?cluster=inference").json()
    assert {r["cluster"] for r in only} == {"inference"}


def test_the_planner_gathers_each_cluster_on_its_own(clusters: tuple[Any, Any]) -> None:
    default, inference = clusters
    here, _ = gather(default)
    there, _ = gather(inference)
    assert [(n.name, n.config) for n in here.nodes] == [("gpu-node-a", "all-1g.10gb")]
    assert [(n.name, n.config) for n in there.nodes] == [("gpu-node-a", "all-3g.40gb")]
    assert (here.nodes[0].offer, there.nodes[0].offer) == ({G1: 56}, {G3: 16})
    assert [d.source for d in here.demand if d.resource == G3] == ["Pending team-a/train-0"]
