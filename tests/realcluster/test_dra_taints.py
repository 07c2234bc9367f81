"""A DRA device tainted for health, on the real scheduler: the NVIDIA driver's health check
taints a GPU that reported a fatal XID error ``gpu.nvidia.com/xid=<xid>:NoSchedule`` and one
that reported a non-fatal XID ``…:None`` (``docs/reference/dra.md``). A claim that does not
tolerate the first waits, the portal says which device and which taint keep it off, and the
pages count that device apart; a claim that tolerates it gets it.

With ``QM_RECORD_DRA=<folder>`` the slice, the claims and the scheduler's words are written
there as ``tainted.json`` (tests/data/dra/ was recorded so)."""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path
from typing import Any

import pytest
from django.test import Client

from cluster import dra
from cluster.models import ObservedPod, ObservedResourceClaim, ObservedResourceSlice
from cluster.services import settings_cluster
from kube import Gateway, ObjectRef
from loop.poll import poll_cluster
from tests.realcluster.kit import RealCluster, need_kit
from tests.realcluster.test_dra import (
    DRA,
    H100_NODE,
    NAMESPACE,
    allocated,
    claim,
    pod,
    product_is,
    published,
    unschedulable,
    whole_gpu_slice,
)
from tests.realcluster.test_loop import hands
from tests.support import wait_for

need_kit()
pytestmark = pytest.mark.django_db
__all__ = ["published"]  # the fixture, shared with test_dra

H100 = product_is("NVIDIA H100 80GB HBM3")
FATAL = {"key": "gpu.nvidia.com/xid", "value": "79", "effect": "NoSchedule"}  # fell off the bus
NOT_FATAL = {"key": "gpu.nvidia.com/xid", "value": "13", "effect": "None"}  # an app's error


def tainted_slice() -> dict[str, Any]:
    """The H100 node's slice as the driver republishes it after its health check: gpu-0
    tainted against scheduling, gpu-1 only marked."""
    item = copy.deepcopy(whole_gpu_slice())
    devices = item["spec"]["devices"]
    devices[0]["taints"] = [FATAL]
    devices[1]["taints"] = [NOT_FATAL]
    item["spec"]["pool"]["generation"] = 2
    return item


def tolerating(item: dict[str, Any]) -> dict[str, Any]:
    """A claim that tolerates any XID taint (to run on the GPU as it is)."""
    item["spec"]["devices"]["requests"][0]["exactly"]["tolerations"] = [
        {"key": "gpu.nvidia.com/xid", "operator": "Exists"}
    ]
    return item


def record(gateway: Gateway, message: str) -> None:
    folder = os.environ.get("QM_RECORD_DRA")
    if not folder:
        return
    out = {
        "source": "kube-apiserver and kube-scheduler 1.36 of the real-control-plane tier, "
        "tests/realcluster/test_dra_taints.py",
        "message": message,
        "slice": gateway.get(ObjectRef(DRA, "ResourceSlice", tainted_slice()["metadata"]["name"])),
        "claims": gateway.list(DRA, "ResourceClaim", namespace=NAMESPACE),
    }
    path = Path(folder) / "tainted.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out, indent=1, sort_keys=True) + "\n")


def test_a_device_tainted_for_health_is_kept_from_claims_and_said_so(
    real_gateway: Gateway,
    published: Gateway,
    real_cluster: RealCluster,
    client: Client,
    platform_admin: Any,
) -> None:
    published.apply(tainted_slice())
    kept = published.get(ObjectRef(DRA, "ResourceSlice", tainted_slice()["metadata"]["name"]))
    taints = [d.get("taints") for d in kept["spec"]["devices"]]
    assert [[{k: t[k] for k in ("key", "value", "effect")} for t in ts] for ts in taints] == [
        [FATAL],
        [NOT_FATAL],
    ], taints
    assert all(t.get("timeAdded") for ts in taints for t in ts)  # the API server stamps it

    team = hands(real_cluster, "kubectl-create")
    # The informational taint does not keep a claim off: the first H100 claim gets gpu-1.
    team.apply(claim("rc-taint-first", "gpu.nvidia.com", H100))
    team.apply(pod("rc-taint-first", "rc-taint-first"))
    first = wait_for(lambda: allocated(team, "rc-taint-first"), 60, "gpu-1 allocated")
    (result,) = first["status"]["allocation"]["devices"]["results"]
    assert result["device"] == "gpu-1", result
    # The second waits: the only free H100 is tainted NoSchedule and it tolerates nothing.
    team.apply(claim("rc-taint-wait", "gpu.nvidia.com", H100))
    team.apply(pod("rc-taint-wait", "rc-taint-wait"))
    message = wait_for(lambda: unschedulable(team, "rc-taint-wait"), 60, "FailedScheduling")
    record(published, message)
    assert "cannot allocate all claims" in message, message

    assert poll_cluster(gateway=real_gateway).ok
    cluster = settings_cluster()
    row = ObservedPod.objects.on(cluster).get(namespace=NAMESPACE, name="rc-taint-wait")
    assert row.pending_message == message
    cause = row.explained["why"]["cause"]
    assert "gpu-0 on gpu-h100-01 has gpu.nvidia.com/xid=79:NoSchedule" in cause, cause
    assert "fatal XID error 79" in cause, cause

    # The pages count it apart: one taken, one tainted, none to be had.
    slices = ObservedResourceSlice.objects.on(cluster).filter(node_name=H100_NODE).values()
    taken = dra.taken_devices(
        ObservedResourceClaim.objects.on(cluster).values_list("allocated", flat=True)
    )
    (offer,) = dra.offers(dra.gpus_of(slices, taken))
    assert (offer.devices, offer.taken, offer.available, offer.tainted) == (2, 1, 0, 1)
    client.force_login(platform_admin)
    page = client.get(f"/fleet/nodes/{H100_NODE}/").content.decode()
    assert "1 tainted" in page
    assert "tainted gpu.nvidia.com/xid=79:NoSchedule" in page

    # A claim that tolerates the taint gets the tainted GPU.
    team.apply(tolerating(claim("rc-taint-tolerant", "gpu.nvidia.com", H100)))
    team.apply(pod("rc-taint-tolerant", "rc-taint-tolerant"))
    tolerant = wait_for(lambda: allocated(team, "rc-taint-tolerant"), 60, "gpu-0 allocated")
    (result,) = tolerant["status"]["allocation"]["devices"]["results"]
    assert result["device"] == "gpu-0", result
    assert poll_cluster(gateway=real_gateway).ok
    made = ObservedResourceClaim.objects.on(cluster).get(name="rc-taint-tolerant")
    assert made.requests[0]["tolerations"] == [
        {"key": "gpu.nvidia.com/xid", "operator": "Exists", "value": "", "effect": ""}
    ]
