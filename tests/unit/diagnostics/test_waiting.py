"""What waits, read from the observed rows: an admitted workload with its stuck pod (Kueue
names the workload on the pod), a workload Kueue says nothing about for minutes, and the
API's rows saying which workload and queue a pod belongs to."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from cluster.models import ObservedObject, ObservedWorkload
from cluster.scope import settings_cluster_id
from tests.factories import NamespaceFactory, ObservedNodeFactory, ObservedPodFactory
from tests.support import explained, written

pytestmark = pytest.mark.django_db
PLACED = (
    "The pod is placed on gpu-h100-01 but has not started: its containers are still being "
    "created there (pulling the image, mounting volumes, or waiting for the GPU device plugin)."
)


def test_an_admitted_workload_shows_its_stuck_pod_and_the_pod_its_workload() -> None:
    now = timezone.now()
    ObservedWorkload.objects.create(
        namespace="team-a",
        name="job-train-b1845",
        queue_name="team-a-train",
        cluster_queue="cq-train",
        admitted=True,
        pods_ready=False,
        admitted_at=now - dt.timedelta(minutes=20),
        last_changed=now,
    )
    ObservedWorkload.objects.create(  # running fine: nothing to say
        namespace="team-a",
        name="job-fine",
        queue_name="team-a-train",
        cluster_queue="cq-train",
        admitted=True,
        admitted_at=now - dt.timedelta(minutes=20),
        last_changed=now,
    )
    ObservedPodFactory(
        name="train-2mv5v",
        phase="Pending",
        node_name="gpu-h100-01",
        queue_name="team-a-train",
        workload_name="job-train-b1845",
    )
    workloads, pods, _ = explained(["team-a"], settings_cluster_id())
    why = {w.name: w.why for w in workloads}  # type: ignore[attr-defined]
    assert why["job-fine"] is None
    assert why["job-train-b1845"].cause == (
        f"Kueue admitted it into ClusterQueue cq-train, but its pod train-2mv5v does not run: {PLACED}"
    )
    (pod,) = pods
    assert pod.why.cause == PLACED  # type: ignore[attr-defined]
    assert pod.why.belongs_to == "workload job-train-b1845 in queue team-a-train"  # type: ignore[attr-defined]


def test_a_workload_kueue_says_nothing_about_says_how_long_and_behind_whom() -> None:
    now = timezone.now()
    ObservedObject.objects.create(
        api_version="kueue.x-k8s.io/v1beta2",
        kind="ClusterQueue",
        name="cq-train",
        status={"pendingWorkloads": 3, "admittedWorkloads": 1},
        last_seen=now,
    )
    ObservedWorkload.objects.create(
        namespace="team-a",
        name="job-quiet",
        queue_name="team-a-train",
        cluster_queue="cq-train",
        created_at=now - dt.timedelta(minutes=11, seconds=5),
        last_changed=now,
    )
    ObservedWorkload.objects.create(
        namespace="team-a",
        name="job-new",
        queue_name="team-a-train",
        cluster_queue="cq-train",
        created_at=now - dt.timedelta(seconds=5),
        last_changed=now,
    )
    workloads, _, _ = explained(["team-a"], settings_cluster_id())
    causes = {w.name: w.why.cause for w in workloads}  # type: ignore[attr-defined]
    assert causes == {
        "job-quiet": "Kueue wrote no reason for it; it has waited 11 min, one of 3 pending "
        "workloads in ClusterQueue cq-train.",
        "job-new": "Kueue has not looked at this workload yet.",
    }


def test_the_api_says_which_workload_and_queue_a_pod_belongs_to(
    client: Client, team_a_admin: Any
) -> None:
    NamespaceFactory(name="team-a", team=team_a_admin.memberships.get().team)
    ObservedPodFactory(
        name="train-2mv5v",
        phase="Pending",
        node_name="gpu-h100-01",
        queue_name="team-a-train",
        workload_name="job-train-b1845",
    )
    now = timezone.now()
    ObservedWorkload.objects.create(  # Kueue's PodsReady timeout evicted it twice
        namespace="team-a",
        name="job-slow-start",
        queue_name="team-a-train",
        reason="Pending",
        message="Exceeded the PodsReady timeout team-a/job-slow-start",
        evictions=2,
        evicted_reason="PodsReadyTimeout",
        evicted_at=now - dt.timedelta(seconds=20),
        requeue_at=now + dt.timedelta(seconds=100),
        queued_at=now - dt.timedelta(seconds=20),
        created_at=now - dt.timedelta(hours=1),
        last_changed=now,
    )
    client.force_login(team_a_admin)
    written()
    evicted, row = client.get("/api/v1/waiting/").json()
    assert (evicted["kind"], evicted["workload"]) == ("Workload", "job-slow-start")
    assert evicted["cause"].startswith(
        "Kueue evicted it after its pods were not ready within its PodsReady timeout "
        "(waitForPodsReady); it goes back in line in "
    )
    assert evicted["cause"].endswith(" s, when its back-off ends (evicted 2 times).")
    assert {k: row[k] for k in ("kind", "name", "queue", "workload", "cause")} == {
        "kind": "Pod",
        "name": "train-2mv5v",
        "queue": "team-a-train",
        "workload": "job-train-b1845",
        "cause": PLACED,
    }
    written()
    page = client.get("/").content.decode()
    assert "Runs for workload job-train-b1845 in queue team-a-train." in page
    assert "evicted 2 times</span>" in page


def test_an_approver_reads_what_waits_in_every_team(
    client: Client, approver: Any, team_a: Any, team_b: Any
) -> None:
    """Approvers see every team on the pages: the API gave them [] (or, asked for a team,
    400 "you are in no team")."""
    NamespaceFactory(name="team-a", team=team_a)
    NamespaceFactory(name="team-b", team=team_b)
    for namespace in ("team-a", "team-b"):
        ObservedPodFactory(
            namespace=namespace,
            name=f"{namespace}-waits",
            phase="Pending",
            pending_reason="Unschedulable",
            pending_message="0/5 nodes are available: 5 Insufficient nvidia.com/gpu.",
        )
    client.force_login(approver)
    rows = client.get("/api/v1/waiting/").json()
    assert {row["namespace"] for row in rows} == {"team-a", "team-b"}
    only_b = client.get("/api/v1/waiting/?team=team-b")
    assert only_b.status_code == 200, only_b.json()
    assert {row["name"] for row in only_b.json()} == {"team-b-waits"}


def test_what_kueue_charges_below_what_pods_ask_is_said_and_whose_never(
    client: Client, team_a_admin: Any, team_b_member: Any
) -> None:
    """Finding 10: team-a's two Jobs are charged 1 GPU each by Kueue (a LimitRange's
    defaultRequest) while their pods ask for 8; the H100s are full, and team-b's admitted
    pod waits for nodes. Team-b is told why, counted, never whose; team-a reads the charge
    on its own workloads."""
    now = timezone.now()
    NamespaceFactory(name="team-a", team=team_a_admin.memberships.get().team)
    NamespaceFactory(name="team-b", team=team_b_member.memberships.get().team)
    for node in ("gpu-h100-01", "gpu-h100-02"):
        ObservedNodeFactory(
            name=node,
            gpu_product="NVIDIA-H100-80GB-HBM3",
            mig_config="all-disabled",
            allocatable={"nvidia.com/gpu": "8"},
            allocated={"nvidia.com/gpu": 8},
        )
    for n, node in enumerate(("gpu-h100-01", "gpu-h100-02")):
        ObservedWorkload.objects.create(
            namespace="team-a",
            name=f"job-over-{n}",
            queue_name="team-a-train",
            cluster_queue="cq-train",
            admitted=True,
            requests={"nvidia.com/gpu": 1},
            admitted_at=now - dt.timedelta(minutes=5),
            last_changed=now,
        )
        ObservedPodFactory(
            name=f"over-{n}",
            node_name=node,
            gpu_requests={"nvidia.com/gpu": 8},
            workload_name=f"job-over-{n}",
        )
    ObservedWorkload.objects.create(
        namespace="team-b",
        name="job-b-2",
        queue_name="team-b-train",
        cluster_queue="cq-train",
        admitted=True,
        pods_ready=False,
        requests={"nvidia.com/gpu": 2},
        admitted_at=now - dt.timedelta(minutes=5),
        last_changed=now,
    )
    ObservedPodFactory(
        namespace="team-b",
        name="b-2-x7k2p",
        phase="Pending",
        gpu_requests={"nvidia.com/gpu": 2},
        workload_name="job-b-2",
        pending_reason="Unschedulable",
        pending_message="0/2 nodes are available: 2 Insufficient nvidia.com/gpu. no new claims "
        "to deallocate, preemption: 0/2 nodes are available: 2 No preemption victims found "
        "for incoming pod.",
    )
    written()
    client.force_login(team_b_member)
    rows = client.get("/api/v1/waiting/").json()
    (pod,) = [r for r in rows if r["kind"] == "Pod"]
    assert pod["cause"].startswith(
        "Kueue admitted it, but 2 admitted workloads are charged 2 gpu by Kueue while their "
        "pods ask for 16: the queues count 14 fewer gpu in use than the nodes hold. All 16 gpu"
    ), pod
    assert "team-a" not in str(rows) and "over-" not in str(rows), rows
    client.force_login(team_a_admin)
    mine = [r for r in client.get("/api/v1/waiting/").json() if r["kind"] == "Workload"]
    assert sorted(r["name"] for r in mine) == ["job-over-0", "job-over-1"]
    assert all(
        r["cause"].startswith("Kueue charged it 1 gpu while its pods ask for 8") for r in mine
    ), mine
