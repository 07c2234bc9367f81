"""Scenarios the demo cluster plays, played by the real control plane: the seed's MIG incident
explained from the real scheduler's words, Kueue's borrowing and places in line as the poll
reads them, and the quota what-if held against what real Kueue then admits and preempts."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from cluster.models import ObservedPod
from cluster.scope import settings_cluster_id
from diagnostics.selectors import explain_waiting
from kube import Gateway, ObjectRef
from loop.poll import poll_cluster
from tests.realcluster.kit import RealCluster, need_kit
from tests.realcluster.test_loop import hands
from tests.support import EVERY_NAME, wait_for

need_kit()
pytestmark = pytest.mark.django_db

FILL = "rc-fill"  # a namespace of the platform team's own, outside the portal's teams
MIG_3G = "nvidia.com/mig-3g.40gb"


def pod(name: str, namespace: str, resources: dict[str, str], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": {"app": name}},
        "spec": {
            "restartPolicy": "Never",
            "containers": [
                {
                    "name": "main",
                    "image": "registry.example/train:1",
                    "resources": {"requests": resources, "limits": resources},
                }
            ],
            **spec,
        },
    }


def scheduler_said(admin: Gateway, namespace: str, name: str) -> str:
    """The real scheduler's last FailedScheduling event for the pod ("" before it)."""
    events = [
        e
        for e in admin.list(
            "v1",
            "Event",
            namespace=namespace,
            field_selector=f"reason=FailedScheduling,involvedObject.name={name}",
        )
    ]
    return events[-1]["message"] if events else ""


@pytest.fixture
def fleet_busy(real_portal: Gateway, real_cluster: RealCluster) -> Iterator[Gateway]:
    """Every 3g.40gb slice of gpu-a100-01 and -02 taken by the platform team's own pods
    (bound by the real scheduler): the pool's nodes are full, as in the seed's incident."""
    admin = hands(real_cluster, "kubectl-create")
    admin.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": FILL}})
    try:
        for n in (1, 2):
            admin.apply(pod(f"fill-{n}", FILL, {MIG_3G: "16"}))
        wait_for(
            lambda: all(
                admin.get(ObjectRef("v1", "Pod", f"fill-{n}", FILL))["spec"].get("nodeName")
                for n in (1, 2)
            ),
            timeout=30,
            what="the fill pods bound",
        )
        yield admin
    finally:
        real_cluster.kube(
            "delete",
            "pods",
            "--all",
            "-n",
            FILL,
            "--grace-period=0",
            "--force",
            "--ignore-not-found",
        )
        real_cluster.kube(
            "delete",
            "pods",
            "--all",
            "-n",
            "team-a",
            "--grace-period=0",
            "--force",
            "--ignore-not-found",
        )


def explained(name: str) -> Any:
    """The portal's "why is it waiting" of a team-a pod, as the last poll stored it."""
    _, pods, _ = explain_waiting(["team-a"], cluster_id=settings_cluster_id(), names=EVERY_NAME)
    (why,) = [p.why for p in pods if p.name == name]
    return why


def test_the_seed_incident_is_explained_from_the_real_schedulers_event(
    real_portal: Gateway, fleet_busy: Gateway
) -> None:
    """team-a's pod asks one 3g.40gb slice; the A100 pool's other nodes are full and
    gpu-a100-03 was left on the balanced test layout (its MIG Manager state failed): the real
    scheduler says what the seed's event says, and the portal names the node, its layout
    against its pool's, and the fix, a MIG change back to all-3g.40gb. The pod as the demo
    writes it (no toleration, no word of whole GPUs) meets team-a's LimitRange first."""
    admin = fleet_busy
    # As the seed's pod: tolerating the GPU taint, and no whole GPU from the LimitRange.
    seed = pod("train-3g", "team-a", {MIG_3G: "1", "nvidia.com/gpu": "0"})
    seed["spec"]["tolerations"] = [{"key": "nvidia.com/gpu", "operator": "Exists"}]
    # (the kit wrote the node's labels as the field manager "kubelet": the portal names it)
    admin.apply(seed)
    admin.apply(pod("train-3g-demo", "team-a", {MIG_3G: "1"}))
    said = {
        name: wait_for(
            lambda name=name: scheduler_said(admin, "team-a", name),
            timeout=30,
            what=f"the scheduler's FailedScheduling event for {name}",
        )
        for name in ("train-3g", "train-3g-demo")
    }
    assert said["train-3g"].startswith(
        "0/5 nodes are available: 5 Insufficient nvidia.com/mig-3g.40gb."
    ), said
    assert said["train-3g-demo"].startswith(
        "0/5 nodes are available: 2 node(s) had untolerated taint(s), 3 Insufficient "
        "nvidia.com/gpu, 3 Insufficient nvidia.com/mig-3g.40gb."
    ), said
    assert poll_cluster(gateway=real_portal).ok
    for name, words in said.items():
        observed = ObservedPod.objects.on_every_cluster().get(namespace="team-a", name=name)
        assert (observed.pending_reason, observed.pending_message) == ("Unschedulable", words)

    why = explained("train-3g")
    assert why.cause.startswith(
        "All 32 mig-3g.40gb in the fleet are in use (0 free, the pod needs 1): gpu-a100-03 would "
        "offer 16 more but was changed to all-balanced by kubelet instead of its pool's "
        "all-3g.40gb (drift since "
    ), why.cause
    assert why.topic == "mig-mismatch"
    assert why.next_step == "Ask for a MIG change that puts gpu-a100-03 back on all-3g.40gb."
    assert why.action is not None and why.action["label"] == "Ask for a MIG change"
    assert "gpu-a100-03" in why.action["url"] and "all-3g.40gb" in why.action["url"]
    assert why.evidence == [said["train-3g"]]

    demo_shaped = explained("train-3g-demo")
    assert demo_shaped.cause.startswith(
        "The LimitRange of team-a gave the pod 1 gpu it did not ask for"
    ), demo_shaped.cause
    assert demo_shaped.action is None
