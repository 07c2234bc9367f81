"""Why a DRA claim waits, as the real scheduler says it and as the portal explains it: claims
for a class that does not exist, for a device no slice publishes, for a device all of which
are taken, and for a whole GPU whose shared counters a MIG device already holds; and a pod
whose claim is made from a ResourceClaimTemplate, linked to the claim made for it.

With ``QM_RECORD_DRA=<folder>`` the pods and the scheduler's words are written there as
``waiting.json`` (tests/data/dra/ was recorded so)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from cluster.models import ObservedPod
from cluster.services import settings_cluster
from kube import Gateway, ObjectRef
from loop.poll import poll_cluster
from tests.realcluster.kit import RealCluster, need_kit
from tests.realcluster.test_dra import (
    DRA,
    DRIVER,
    NAMESPACE,
    allocated,
    claim,
    pod,
    product_is,
    published,
    unschedulable,
)
from tests.realcluster.test_loop import hands
from tests.support import wait_for

need_kit()
pytestmark = pytest.mark.django_db
__all__ = ["published"]  # the fixture, shared with test_dra

H100 = product_is("NVIDIA H100 80GB HBM3")
A100 = product_is("NVIDIA A100-SXM4-80GB")
WAITING = {
    "rc-wait-class": ("no-such.nvidia.com", "device.driver == 'gpu.nvidia.com'"),
    "rc-wait-nomatch": ("gpu.nvidia.com", product_is("NVIDIA B200")),
    "rc-wait-taken": ("gpu.nvidia.com", H100),
    "rc-wait-counters": ("gpu.nvidia.com", A100),
}


def template(name: str) -> dict[str, Any]:
    made = claim(name, "mig.nvidia.com", f"device.attributes['{DRIVER}'].profile == '3g.40gb'")
    return {
        "apiVersion": DRA,
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {"spec": made["spec"]},
    }


def templated_pod(name: str, template_name: str) -> dict[str, Any]:
    item = pod(name, "")
    item["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": template_name}]
    return item


def record(gateway: Gateway, messages: dict[str, str]) -> None:
    folder = os.environ.get("QM_RECORD_DRA")
    if not folder:
        return
    pods = gateway.list("v1", "Pod", namespace=NAMESPACE)
    events = [
        {k: e.get(k) for k in ("type", "reason", "message", "involvedObject")}
        for e in gateway.list(
            "v1", "Event", namespace=NAMESPACE, field_selector="reason=FailedScheduling"
        )
    ]
    out = {"messages": messages, "pods": pods, "events": events}
    claims = gateway.list(DRA, "ResourceClaim", namespace=NAMESPACE)
    out["claims"] = claims
    path = Path(folder) / "waiting.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out, indent=1, sort_keys=True) + "\n")


def test_claims_the_scheduler_cannot_allocate_wait_with_its_words_and_templates_link(
    real_gateway: Gateway, published: Gateway, real_cluster: RealCluster
) -> None:
    admin = hands(real_cluster, "kubectl-create")
    # Both H100s and a MIG slice of the A100 taken first, so that what follows must wait.
    for name, device_class, selector in (
        ("rc-h100-a", "gpu.nvidia.com", H100),
        ("rc-h100-b", "gpu.nvidia.com", H100),
    ):
        admin.apply(claim(name, device_class, selector))
        admin.apply(pod(name, name))
    admin.apply(template("rc-mig-template"))
    admin.apply(templated_pod("rc-templated", "rc-mig-template"))
    for name in ("rc-h100-a", "rc-h100-b"):
        wait_for(lambda name=name: allocated(admin, name), 60, f"{name} allocated")
    made = wait_for(
        lambda: (
            admin.get(ObjectRef("v1", "Pod", "rc-templated", NAMESPACE)).get("status") or {}
        ).get("resourceClaimStatuses"),
        60,
        "the claim made from the template",
    )
    (made_claim,) = made
    wait_for(lambda: allocated(admin, made_claim["resourceClaimName"]), 60, "the MIG slice")
    for name, (device_class, selector) in WAITING.items():
        admin.apply(claim(name, device_class, selector))
        admin.apply(pod(name, name))
    messages = {
        name: wait_for(lambda name=name: unschedulable(admin, name), 60, f"{name} refused")
        for name in WAITING
    }
    record(real_gateway, messages)

    assert poll_cluster(gateway=real_gateway).ok
    cluster = settings_cluster()
    rows = {p.name: p for p in ObservedPod.objects.on(cluster).filter(namespace=NAMESPACE)}
    assert rows["rc-templated"].resource_claims == [
        {"name": "gpu", "claim": made_claim["resourceClaimName"], "template": "rc-mig-template"}
    ]
    assert rows["rc-h100-a"].resource_claims == [
        {"name": "gpu", "claim": "rc-h100-a", "template": ""}
    ]
    for name in WAITING:
        assert rows[name].pending_reason == "Unschedulable", name
        assert rows[name].pending_message == messages[name]
    # The explainer's cause for each (its sentences: tests/unit/diagnostics/test_explain_dra.py)
    causes = {name: rows[name].explained["why"]["cause"] for name in WAITING}
    assert causes["rc-wait-class"].startswith("The cluster has no device class no-such"), causes
    assert causes["rc-wait-nomatch"].startswith("No device published through DRA matches")
    assert causes["rc-wait-taken"].startswith("Every whole GPU that the pod's claim")
    assert "hold its shared counters" in causes["rc-wait-counters"]


def counted(item: dict[str, Any], count: int) -> dict[str, Any]:
    """A claim asking for ``count`` devices of its one request."""
    item["spec"]["devices"]["requests"][0]["exactly"]["count"] = count
    return item


def two_claims_pod(name: str, first: str, second: str) -> dict[str, Any]:
    item = pod(name, first)
    item["spec"]["containers"][0]["resources"]["claims"] = [{"name": "a"}, {"name": "b"}]
    item["spec"]["resourceClaims"] = [
        {"name": "a", "resourceClaimName": first},
        {"name": "b", "resourceClaimName": second},
    ]
    return item


def test_a_claims_devices_and_a_pods_claims_must_share_one_node(
    real_gateway: Gateway, published: Gateway, real_cluster: RealCluster
) -> None:
    """Three whole GPUs are published (two H100s on one node, the A100 on another), none
    allocated: a claim for three waits, and so does a pod asking for both H100s and a
    3g.40gb slice of the A100 in two claims, each of which alone would be allocated. With
    ``QM_RECORD_DRA`` the scheduler's words are written as ``apart.json``."""
    admin = hands(real_cluster, "kubectl-create")
    admin.apply(counted(claim("rc-spread", "gpu.nvidia.com", f"device.driver == '{DRIVER}'"), 3))
    admin.apply(pod("rc-spread", "rc-spread"))
    admin.apply(counted(claim("rc-apart-h100", "gpu.nvidia.com", H100), 2))
    mig = f"device.attributes['{DRIVER}'].profile == '3g.40gb'"
    admin.apply(claim("rc-apart-mig", "mig.nvidia.com", mig))
    admin.apply(two_claims_pod("rc-apart", "rc-apart-h100", "rc-apart-mig"))
    messages = {
        name: wait_for(lambda name=name: unschedulable(admin, name), 60, f"{name} refused")
        for name in ("rc-spread", "rc-apart")
    }
    folder = os.environ.get("QM_RECORD_DRA")
    if folder:
        out = {
            "source": "kube-scheduler 1.36 of the real-control-plane tier, "
            "tests/realcluster/test_dra_waits.py over resourceslices.json",
            "messages": messages,
            "pods": [admin.get(ObjectRef("v1", "Pod", n, NAMESPACE)) for n in messages],
            "claims": admin.list(DRA, "ResourceClaim", namespace=NAMESPACE),
        }
        (Path(folder) / "apart.json").write_text(json.dumps(out, indent=1, sort_keys=True) + "\n")
    for message in messages.values():
        assert "cannot allocate all claims" in message, messages

    assert poll_cluster(gateway=real_gateway).ok
    rows = {p.name: p for p in ObservedPod.objects.on(settings_cluster()).filter(name__in=messages)}
    causes = {name: rows[name].explained["why"]["cause"] for name in messages}
    assert (
        "at most 2 whole GPU match on any one node (3 in the whole cluster)"
        in (causes["rc-spread"])
    ), causes
    assert causes["rc-apart"].startswith("Each of the pod's claims could be had on some node")
