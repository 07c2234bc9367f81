"""Dynamic Resource Allocation observed through the portal: the test publishes ResourceSlices
as the NVIDIA DRA driver would (two whole H100s; an A100 announced as partitionable, its MIG
3g.40gb devices and the whole GPU counting against one shared counter set, KEP-4815), with
the driver's DeviceClasses; the REAL scheduler allocates the claims of pods; one poll, as the
portal's ServiceAccount, writes the classes, slices and claims the cluster shows. A claim the
scheduler cannot allocate (the whole A100 once a MIG slice of it is taken) stays pending, with
the scheduler's words on its pod.

Attribute, class and counter names are the driver's (docs/reference/dra.md). With
``QM_RECORD_DRA=<folder>`` the objects as the portal listed them are written there
(tests/data/dra/ was recorded so)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cluster.models import (
    ObservedDeviceClass,
    ObservedPod,
    ObservedResourceClaim,
    ObservedResourceSlice,
)
from cluster.services import settings_cluster
from kube import Gateway, NotFound, ObjectRef
from loop.poll import poll_cluster
from tests.realcluster.kit import RealCluster, need_kit
from tests.realcluster.test_loop import hands
from tests.support import wait_for

need_kit()
pytestmark = pytest.mark.django_db

DRA = "resource.k8s.io/v1"
DRIVER = "gpu.nvidia.com"
NAMESPACE = "rc-dra"
H100_NODE, A100_NODE = "gpu-h100-01", "gpu-a100-01"
COUNTER_SET = "gpu-0-counter-set"  # the driver's "gpu-<minor>-counter-set"
MEMORY_SLICES = 8  # A100: 8 memory slices; 3g.40gb takes 4 of them (mig-profiles.yaml)


def attributes(**values: Any) -> dict[str, Any]:
    """Device attributes as the API takes them: each value typed (string, int, bool, version)."""
    typed = {}
    for name, value in values.items():
        if isinstance(value, tuple):  # ("version", "8.0.0")
            typed[name] = {value[0]: value[1]}
        elif isinstance(value, bool):
            typed[name] = {"bool": value}
        elif isinstance(value, int):
            typed[name] = {"int": value}
        else:
            typed[name] = {"string": value}
    return typed


def amounts(**values: str) -> dict[str, dict[str, str]]:
    return {name.replace("_", "-"): {"value": value} for name, value in values.items()}


def gpu_attributes(product: str, uuid: str, architecture: str, compute: str) -> dict[str, Any]:
    return attributes(
        type="gpu",
        uuid=uuid,
        productName=product,
        brand="Nvidia",
        architecture=architecture,
        cudaComputeCapability=("version", compute),
        driverVersion=("version", "580.105.8"),
        cudaDriverVersion=("version", "13.0.0"),
    )


def whole_gpu_slice() -> dict[str, Any]:
    """Two whole H100 GPUs of one node, as the driver publishes them without partitioning."""
    devices = [
        {
            "name": f"gpu-{minor}",
            "attributes": gpu_attributes(
                "NVIDIA H100 80GB HBM3", f"GPU-h100-01-{minor}", "Hopper", "9.0.0"
            ),
            "capacity": amounts(memory="81559Mi"),
        }
        for minor in (0, 1)
    ]
    return {
        "apiVersion": DRA,
        "kind": "ResourceSlice",
        "metadata": {"name": f"{H100_NODE}-{DRIVER}-whole"},
        "spec": {
            "driver": DRIVER,
            "nodeName": H100_NODE,
            "pool": {"name": H100_NODE, "generation": 1, "resourceSliceCount": 1},
            "devices": devices,
        },
    }


def memory_slices(start: int, size: int) -> dict[str, dict[str, str]]:
    return {f"memory-slice-{i}": {"value": "1"} for i in range(start, start + size)}


def partitionable_slices() -> list[dict[str, Any]]:
    """One A100 80GB announced as partitionable: a slice sharing its counter set and a slice
    with its devices (one slice cannot hold both), the whole GPU consuming every counter and
    each 3g.40gb device (GI profile 9, placements 0 and 4) 42 multiprocessors, 40192Mi and
    four memory slices."""
    pool = {"name": A100_NODE, "generation": 1, "resourceSliceCount": 2}
    whole = {**amounts(multiprocessors="98", memory="81920Mi"), **memory_slices(0, MEMORY_SLICES)}
    uuid = "GPU-a100-01-0"
    devices = [
        {
            "name": "gpu-0",
            "attributes": gpu_attributes("NVIDIA A100-SXM4-80GB", uuid, "Ampere", "8.0.0"),
            "capacity": amounts(multiprocessors="98", memory="81920Mi"),
            "consumesCounters": [{"counterSet": COUNTER_SET, "counters": whole}],
        }
    ]
    for start in (0, 4):
        mig = attributes(
            type="mig",
            parentUUID=uuid,
            profile="3g.40gb",
            productName="NVIDIA A100-SXM4-80GB",
            brand="Nvidia",
            architecture="Ampere",
            cudaComputeCapability=("version", "8.0.0"),
            driverVersion=("version", "580.105.8"),
            cudaDriverVersion=("version", "13.0.0"),
        )
        devices.append(
            {
                "name": f"gpu-0-mig-3g40gb-9-{start}",
                "attributes": mig,
                "capacity": amounts(multiprocessors="42", memory="40192Mi"),
                "consumesCounters": [
                    {
                        "counterSet": COUNTER_SET,
                        "counters": {
                            **amounts(multiprocessors="42", memory="40192Mi"),
                            **memory_slices(start, 4),
                        },
                    }
                ],
            }
        )
    spec = {"driver": DRIVER, "nodeName": A100_NODE, "pool": pool}
    return [
        {
            "apiVersion": DRA,
            "kind": "ResourceSlice",
            "metadata": {"name": f"{A100_NODE}-{DRIVER}-counters"},
            "spec": {**spec, "sharedCounters": [{"name": COUNTER_SET, "counters": whole}]},
        },
        {
            "apiVersion": DRA,
            "kind": "ResourceSlice",
            "metadata": {"name": f"{A100_NODE}-{DRIVER}-devices"},
            "spec": {**spec, "devices": devices},
        },
    ]


def device_class(name: str, device_type: str) -> dict[str, Any]:
    expression = (
        f"device.driver == '{DRIVER}' && device.attributes['{DRIVER}'].type == '{device_type}'"
    )
    return {
        "apiVersion": DRA,
        "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": {"selectors": [{"cel": {"expression": expression}}]},
    }


def claim(name: str, device_class_name: str, selector: str) -> dict[str, Any]:
    return {
        "apiVersion": DRA,
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "devices": {
                "requests": [
                    {
                        "name": "gpu",
                        "exactly": {
                            "deviceClassName": device_class_name,
                            "selectors": [{"cel": {"expression": selector}}],
                        },
                    }
                ]
            }
        },
    }


def pod(name: str, claim_name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "restartPolicy": "Never",
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}],
            "containers": [
                {
                    "name": "main",
                    "image": "registry.example/train:1",
                    "resources": {"claims": [{"name": "gpu"}]},
                }
            ],
            "resourceClaims": [{"name": "gpu", "resourceClaimName": claim_name}],
        },
    }


SLICES = [whole_gpu_slice(), *partitionable_slices()]
CLASSES = [device_class("gpu.nvidia.com", "gpu"), device_class("mig.nvidia.com", "mig")]


@pytest.fixture
def published(real_cluster: RealCluster) -> Iterator[Gateway]:
    """The driver's classes and slices published (by the test's admin hands), and all of it
    gone afterwards: the pods at once (no kubelet ends them), then claims, slices, classes."""
    admin = hands(real_cluster, "dra-driver")
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}

    def active() -> bool:
        """The namespace made anew where the previous test's is still going away."""
        try:
            found = admin.get(ObjectRef.of(namespace))
        except NotFound:
            admin.apply(namespace)
            return False
        return (found.get("status") or {}).get("phase") == "Active"

    admin.apply(namespace)
    wait_for(active, 60, f"namespace {NAMESPACE} active")
    for item in [*CLASSES, *SLICES]:
        admin.apply(item)
    try:
        yield admin
    finally:
        real_cluster.kube("delete", "pods", "-n", NAMESPACE, "--all", "--grace-period=0", "--force")
        real_cluster.kube("delete", "resourceclaims", "-n", NAMESPACE, "--all", "--wait=false")
        for item in [*SLICES, *CLASSES]:
            admin.delete(ObjectRef.of(item))
        real_cluster.kube("delete", "namespace", NAMESPACE, "--wait=false")


def allocated(gateway: Gateway, name: str) -> dict[str, Any] | None:
    item = gateway.get(ObjectRef(DRA, "ResourceClaim", name, NAMESPACE))
    status = item.get("status") or {}
    return item if status.get("allocation") and status.get("reservedFor") else None


def unschedulable(gateway: Gateway, name: str) -> str:
    """The scheduler's message on a pod it could not place ("" until it says one)."""
    status = gateway.get(ObjectRef("v1", "Pod", name, NAMESPACE)).get("status") or {}
    for condition in status.get("conditions") or ():
        if condition.get("type") == "PodScheduled" and condition.get("status") == "False":
            return str(condition.get("message", ""))
    return ""


def record(gateway: Gateway, blocked_message: str) -> None:
    """The objects as the portal's gateway lists them, into ``QM_RECORD_DRA`` (if set)."""
    folder = os.environ.get("QM_RECORD_DRA")
    if not folder:
        return
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    for kind, file in (
        ("DeviceClass", "deviceclasses.json"),
        ("ResourceSlice", "resourceslices.json"),
        ("ResourceClaim", "resourceclaims.json"),
    ):
        items = gateway.list(DRA, kind)
        (out / file).write_text(json.dumps(items, indent=1, sort_keys=True) + "\n")
    events = [
        {k: e.get(k) for k in ("type", "reason", "message", "involvedObject")}
        for e in gateway.list(
            "v1", "Event", namespace=NAMESPACE, field_selector="reason=FailedScheduling"
        )
    ]
    blocked = {"pod_condition_message": blocked_message, "events": events}
    (out / "failed-scheduling.json").write_text(json.dumps(blocked, indent=1) + "\n")


def test_the_poll_observes_classes_slices_and_the_claims_the_scheduler_allocated(
    real_gateway: Gateway, published: Gateway, real_cluster: RealCluster
) -> None:
    admin = hands(real_cluster, "kubectl-create")  # a team's claims and pods
    admin.apply(claim("rc-whole", "gpu.nvidia.com", product_is("NVIDIA H100 80GB HBM3")))
    admin.apply(pod("rc-dra-whole", "rc-whole"))
    mig = f"device.attributes['{DRIVER}'].profile == '3g.40gb'"
    admin.apply(claim("rc-mig", "mig.nvidia.com", mig))
    admin.apply(pod("rc-dra-mig", "rc-mig"))
    whole = wait_for(lambda: allocated(admin, "rc-whole"), 60, "the whole H100 allocated")
    taken = wait_for(lambda: allocated(admin, "rc-mig"), 60, "the 3g.40gb slice allocated")
    # The whole A100 shares its counters with the 3g.40gb slice just taken: it cannot be had.
    admin.apply(claim("rc-blocked", "gpu.nvidia.com", product_is("NVIDIA A100-SXM4-80GB")))
    admin.apply(pod("rc-dra-blocked", "rc-blocked"))
    message = wait_for(lambda: unschedulable(admin, "rc-dra-blocked"), 60, "FailedScheduling")
    assert "cannot allocate all claims" in message, message

    run = poll_cluster(gateway=real_gateway)
    assert run.ok, run.error
    record(real_gateway, message)
    cluster = settings_cluster()

    classes = {c.name: c for c in ObservedDeviceClass.objects.on(cluster)}
    assert sorted(classes) == ["gpu.nvidia.com", "mig.nvidia.com"]
    assert {c.driver for c in classes.values()} == {DRIVER}

    slices = {s.name: s for s in ObservedResourceSlice.objects.on(cluster)}
    assert sorted(slices) == sorted(s["metadata"]["name"] for s in SLICES)
    counters = slices[f"{A100_NODE}-{DRIVER}-counters"]
    assert (counters.node_name, counters.pool, counters.slice_count) == (A100_NODE, A100_NODE, 2)
    assert counters.devices == []
    assert counters.shared_counters[0]["name"] == COUNTER_SET
    assert counters.shared_counters[0]["counters"]["multiprocessors"] == "98"
    devices = {d["name"]: d for d in slices[f"{A100_NODE}-{DRIVER}-devices"].devices}
    assert devices["gpu-0-mig-3g40gb-9-4"]["attributes"]["profile"] == "3g.40gb"
    assert devices["gpu-0-mig-3g40gb-9-4"]["consumesCounters"][0]["counters"]["memory-slice-7"]
    assert devices["gpu-0"]["attributes"]["cudaComputeCapability"] == "8.0.0"

    claims = {c.name: c for c in ObservedResourceClaim.objects.on(cluster)}
    (whole_result,) = whole["status"]["allocation"]["devices"]["results"]
    assert whole_result["pool"] == H100_NODE
    assert claims["rc-whole"].state == "allocated"
    assert claims["rc-whole"].allocated == [
        {"request": "gpu", "driver": DRIVER, "pool": H100_NODE, "device": whole_result["device"]}
    ]
    assert whole_result["device"] in ("gpu-0", "gpu-1")
    assert claims["rc-whole"].node_name == H100_NODE
    assert claims["rc-whole"].reserved_for == [{"resource": "pods", "name": "rc-dra-whole"}]
    (mig_result,) = taken["status"]["allocation"]["devices"]["results"]
    assert claims["rc-mig"].allocated == [
        {"request": "gpu", "driver": DRIVER, "pool": A100_NODE, "device": mig_result["device"]}
    ]
    assert mig_result["device"].startswith("gpu-0-mig-3g40gb-9-")
    assert claims["rc-mig"].reserved_for == [{"resource": "pods", "name": "rc-dra-mig"}]
    assert claims["rc-mig"].requests == [
        {
            "name": "gpu",
            "device_class": "mig.nvidia.com",
            "mode": "ExactCount",
            "count": 1,
            "selectors": [mig],
        }
    ]
    blocked = claims["rc-blocked"]
    assert (blocked.state, blocked.allocated, blocked.reserved_for) == ("pending", [], [])
    waiting = ObservedPod.objects.on(cluster).get(namespace=NAMESPACE, name="rc-dra-blocked")
    assert waiting.pending_reason == "Unschedulable"
    assert "cannot allocate all claims" in waiting.pending_message

    # The claims gone from the cluster are gone from the rows at the next poll.
    admin.delete(ObjectRef("v1", "Pod", "rc-dra-blocked", NAMESPACE))
    admin.delete(ObjectRef(DRA, "ResourceClaim", "rc-blocked", NAMESPACE))
    wait_for(
        lambda: (
            not any(
                c["metadata"]["name"] == "rc-blocked"
                for c in admin.list(DRA, "ResourceClaim", namespace=NAMESPACE)
            )
        ),
        30,
        "the blocked claim deleted",
    )
    assert poll_cluster(gateway=real_gateway).ok
    names = set(ObservedResourceClaim.objects.on(cluster).values_list("name", flat=True))
    assert names == {"rc-whole", "rc-mig"}


def product_is(product: str) -> str:
    return f"device.attributes['{DRIVER}'].productName == '{product}'"
