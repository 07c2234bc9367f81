"""A MIG change end to end against the real API server, as the portal's ServiceAccount: asked
and approved through the portal's services, run by the executor (cordon, the real Eviction
API, the ``nvidia.com/mig.config`` label, MIG Manager's state, the node's new allocatable,
uncordon, the queue change), with the test playing the kubelet (a Running pod; an evicted
pod's end) and MIG Manager (``pending`` with its operands paused, then the layout and
``success``). Then a PodDisruptionBudget holding the eviction (the API server's 429), an
admin's abort, a rollback that undoes what ran, and the change asked again, succeeding."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth.models import User
from kubernetes import client as kube_client
from kubernetes.client.exceptions import ApiException

from changes import executor
from changes import mig as changes
from changes.models import MigChangeRequest, MigChangeStep
from kube import Gateway, ObjectRef
from loop.apply import apply_desired_state
from loop.poll import poll_cluster
from queues.models import ClusterQueue
from tenants.models import Team
from tests.realcluster.kit import RealCluster, need_kit
from tests.realcluster.player import STATE, Kubelet, MigManager
from tests.realcluster.test_loop import hands
from tests.support import wait_for

need_kit()
pytestmark = pytest.mark.django_db

NODE = "gpu-a100-03"  # the seed's node: left on all-balanced (state failed), 2g and 1g slices
CONFIG = "nvidia.com/mig.config"
POD = "rc-dev-1g"
BUDGET = ObjectRef("policy/v1", "PodDisruptionBudget", "rc-dev-pdb", "team-dev")


@pytest.fixture
def dev_pod(real_portal: Gateway, real_cluster: RealCluster, kubelet: Kubelet) -> Iterator[str]:
    """team-dev's pod on a 1g.10gb slice, placed by the real scheduler on the node (the only
    one with 1g slices) and Running; afterwards the pod, the budget and the node as the kit
    made them (deleted and created again: a merge of its old status would keep the new
    slices)."""
    admin = hands(real_cluster, "kubectl-create")
    admin.apply(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": POD, "namespace": "team-dev", "labels": {"app": POD}},
            "spec": {
                "restartPolicy": "Never",
                "containers": [
                    {
                        "name": "main",
                        "image": "registry.example/dev:1",
                        "resources": {
                            "requests": {"nvidia.com/mig-1g.10gb": "1"},
                            "limits": {"nvidia.com/mig-1g.10gb": "1"},
                        },
                    }
                ],
            },
        }
    )
    try:
        wait_for(
            lambda: kubelet.api.read_namespaced_pod(POD, "team-dev").spec.node_name,
            timeout=30,
            what="the scheduler to bind the dev pod",
        )
        assert kubelet.api.read_namespaced_pod(POD, "team-dev").spec.node_name == NODE
        kubelet.run("team-dev", POD)
        yield POD
    finally:
        real_cluster.kube(
            "delete",
            "pod",
            POD,
            "-n",
            "team-dev",
            "--ignore-not-found",
            "--grace-period=0",
            "--force",
        )
        admin.delete(BUDGET)
        real_cluster.run("nodes.sh", "--delete", NODE, timeout=60)
        real_cluster.run("nodes.sh", NODE, timeout=60)


def ask(real_gateway: Gateway) -> MigChangeRequest:
    """lead-a asks gpu-a100-03 back to its pool's all-3g.40gb (the seed's fix), on what the
    poll has just read."""
    poll_cluster(gateway=real_gateway)
    return changes.request_mig_change(
        actor=User.objects.get(username="lead-a"),
        team=Team.objects.get(slug="team-a"),
        nodes=[NODE],
        target_config="all-3g.40gb",
        reason="gpu-a100-03 was left on a test layout; team-a's 3g.40gb jobs wait.",
    )


def approve(request: MigChangeRequest) -> None:
    changes.approve_mig_change(
        request_id=request.pk, approver=User.objects.get(username="approver"), comment="Go."
    )


def drive(
    request: MigChangeRequest,
    gateway: Gateway,
    kubelet: Kubelet,
    mig_manager: MigManager,
    *,
    looks: int = 40,
) -> tuple[str, list[str]]:
    """The executor run as its task reruns it, the kubelet and MIG Manager answering
    between runs, until it stops waiting; the request's state and what MIG Manager wrote."""
    states = []
    for _ in range(looks):
        if executor.advance(request.pk, gateway=gateway).kind != "wait":
            break
        kubelet.end_deleted(NODE)
        if said := mig_manager.answer(NODE):
            states.append(said)
        time.sleep(0.2)
    request.refresh_from_db()
    return request.state, states


def node(kubelet: Kubelet) -> Any:
    return kubelet.api.read_node(NODE)


def gpu_allocatable(live: Any) -> dict[str, str]:
    return {k: v for k, v in live.status.allocatable.items() if k.startswith("nvidia.com/")}


def test_a_mig_change_runs_end_to_end_on_the_real_api_server(
    real_gateway: Gateway,
    dev_pod: str,
    kubelet: Kubelet,
    mig_manager: MigManager,
    real_cluster: RealCluster,
) -> None:
    mig_manager.watch(NODE)
    request = ask(real_gateway)
    assert [e["pod"] for e in request.assessment["evictions"]] == [dev_pod]
    # cq-dev counted on the test layout's slices: the change carries their removal.
    assert {(q["resource"], q["to"]) for q in request.queue_changes} >= {
        ("nvidia.com/mig-1g.10gb", 0),
        ("nvidia.com/mig-2g.20gb", 0),
    }
    approve(request)
    state, said = drive(request, real_gateway, kubelet, mig_manager)
    assert (state, request.failure) == ("succeeded", "")
    assert said == ["pending", "success"]  # MIG Manager's sequence, the executor waiting on it
    steps = list(
        MigChangeStep.objects.filter(request=request).order_by("id").values_list("step", "status")
    )
    assert steps == [*[(s, "done") for s in executor.STEPS], ("queues", "done")]
    evict = MigChangeStep.objects.get(request=request, step="evict")
    assert evict.pods == [f"team-dev/{dev_pod}"]
    # The node as the API server has it: the new config, MIG Manager's success, its
    # operands back, the new slices only, schedulable again, no taint added or left.
    live = node(kubelet)
    labels = live.metadata.labels
    assert (labels[CONFIG], labels[STATE]) == ("all-3g.40gb", "success")
    assert labels["nvidia.com/gpu.deploy.device-plugin"] == "true"
    assert gpu_allocatable(live) == {
        "nvidia.com/mig-1g.10gb": "0",
        "nvidia.com/mig-2g.20gb": "0",
        "nvidia.com/mig-3g.40gb": "16",
    }
    assert not live.spec.unschedulable
    assert not live.spec.taints
    # The pod was evicted through the Eviction API (a graceful deletion its kubelet ended).
    assert not kubelet.api.list_namespaced_pod(
        "team-dev", field_selector=f"metadata.name={POD}"
    ).items
    # The queue change, applied by the loop: Kueue's cq-dev no longer promises the slices.
    report = apply_desired_state(gateway=real_gateway)
    assert not report.failed and not report.conflicts, report
    cq = hands(real_cluster).get(ObjectRef("kueue.x-k8s.io/v1beta2", "ClusterQueue", "cq-dev"))
    nominal = {
        (f["name"], r["name"]): r["nominalQuota"]
        for g in cq["spec"]["resourceGroups"]
        for f in g["flavors"]
        for r in f["resources"]
    }
    for change in request.queue_changes:
        assert nominal[(change["flavor"], change["resource"])] == str(change["to"]), nominal
    desired = ClusterQueue.objects.get(name="cq-dev").quota()
    assert all(desired[(q["flavor"], q["resource"])] == q["to"] for q in request.queue_changes)
    # The next poll reads the node's new layout.
    assert poll_cluster(gateway=real_gateway).ok


def test_a_budget_holds_the_eviction_an_abort_and_rollback_undo_what_ran_and_a_retry_succeeds(
    real_gateway: Gateway,
    dev_pod: str,
    kubelet: Kubelet,
    mig_manager: MigManager,
    real_cluster: RealCluster,
) -> None:
    admin = hands(real_cluster, "kubectl-create")
    admin.apply(
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": BUDGET.name, "namespace": BUDGET.namespace},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": POD}}},
        }
    )
    wait_for(
        lambda: (admin.get(BUDGET).get("status") or {}).get("currentHealthy") == 1,
        timeout=20,
        what="the disruption controller to count the Running pod",
    )
    # The Eviction API refuses it: 429, the budget named in the cause.
    with pytest.raises(ApiException) as refused:
        kubelet.api.create_namespaced_pod_eviction(
            POD,
            "team-dev",
            kube_client.V1Eviction(
                metadata=kube_client.V1ObjectMeta(name=POD, namespace="team-dev"),
                delete_options=kube_client.V1DeleteOptions(dry_run=["All"]),
            ),
        )
    assert refused.value.status == 429
    assert "The disruption budget rc-dev-pdb needs 1 healthy pods" in refused.value.body
    mig_manager.watch(NODE)
    before = node(kubelet).metadata.labels
    request = ask(real_gateway)
    assert any("will be blocked" in r for r in request.assessment["reasons"])
    approve(request)
    for _ in range(3):  # cordoned, then held at evict however often it runs
        assert executor.advance(request.pk, gateway=real_gateway).kind == "wait"
    held = MigChangeStep.objects.get(request=request, round="apply", step="evict")
    assert held.message == (
        f"evicting team-dev/{POD} (blocked: team-dev/{POD} is held by PodDisruptionBudget "
        "team-dev/rc-dev-pdb (The disruption budget team-dev/rc-dev-pdb needs 1 healthy pods "
        "and has 1 currently))"
    )
    assert node(kubelet).spec.unschedulable is True
    assert node(kubelet).metadata.labels[CONFIG] == "all-balanced"

    admin_user = User.objects.get(username="admin")
    changes.abort_mig_change(request_id=request.pk, actor=admin_user)
    assert executor.advance(request.pk, gateway=real_gateway).kind == "failed"
    request.refresh_from_db()
    assert request.state == "failed"
    assert request.failure.startswith(f"Aborted by admin before evict on {NODE}")
    assert executor.steps_that_ran(request, NODE) == {"cordon", "evict"}
    assert node(kubelet).spec.unschedulable is True  # left cordoned

    changes.rollback_mig_change(request_id=request.pk, actor=admin_user)
    state, said = drive(request, real_gateway, kubelet, mig_manager)
    assert (state, said) == ("rolled_back", [])
    rollback = MigChangeStep.objects.filter(request=request, round="rollback")
    assert list(rollback.values_list("step", "status")) == [("uncordon", "done")]
    live = node(kubelet)
    assert not live.spec.unschedulable and not live.spec.taints
    assert {k: live.metadata.labels.get(k) for k in (CONFIG, STATE)} == {
        CONFIG: before[CONFIG],
        STATE: before[STATE],
    }
    pod = kubelet.api.read_namespaced_pod(POD, "team-dev")
    assert pod.metadata.deletion_timestamp is None and pod.status.phase == "Running"

    # The team lifts its budget; the change asked again succeeds.
    admin.delete(BUDGET)
    retry = ask(real_gateway)
    assert not any("will be blocked" in r for r in retry.assessment["reasons"])
    approve(retry)
    state, said = drive(retry, real_gateway, kubelet, mig_manager)
    assert (state, retry.failure, said) == ("succeeded", "", ["pending", "success"])
    live = node(kubelet)
    assert (live.metadata.labels[CONFIG], live.metadata.labels[STATE]) == (
        "all-3g.40gb",
        "success",
    )
    assert gpu_allocatable(live)["nvidia.com/mig-3g.40gb"] == "16"
    assert not live.spec.unschedulable
    assert not kubelet.api.list_namespaced_pod(
        "team-dev", field_selector=f"metadata.name={POD}"
    ).items
