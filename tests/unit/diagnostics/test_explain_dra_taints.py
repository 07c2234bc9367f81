"""A DRA device tainted for health, read from what a real API server and scheduler
(Kubernetes 1.36) answered: tests/data/dra/tainted.json, recorded by
tests/realcluster/test_dra_taints.py. The NVIDIA driver's health check taints a GPU that
reported a fatal XID ``gpu.nvidia.com/xid=79:NoSchedule`` (gpu-0) and marks one with a
non-fatal XID ``…=13:None`` (gpu-1); the first H100 claim got gpu-1, the second waits with
the scheduler's usual "cannot allocate all claims"."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from cluster import dra
from cluster.decode import resource_claim_values, resource_slice_values
from diagnostics.explain import FleetView, explain_pod

RECORDED = Path(__file__).resolve().parents[2] / "data" / "dra"
TAINTED = json.loads((RECORDED / "tainted.json").read_text())
SLICE = resource_slice_values(TAINTED["slice"])
CLAIMS = {c["metadata"]["name"]: resource_claim_values(c) for c in TAINTED["claims"]}
CLASSES = {"gpu.nvidia.com": ["device.driver == 'gpu.nvidia.com'"]}
WAITING = CLAIMS["rc-taint-wait"]["requests"][0]


def fleet(*allocated: str) -> list[dra.Gpu]:
    """The H100 node's two GPUs with the named claims' devices taken."""
    return dra.gpus_of([SLICE], dra.taken_devices(CLAIMS[c]["allocated"] for c in allocated))


def asking(*tolerations: dict[str, str]) -> dict[str, Any]:
    return {**copy.deepcopy(WAITING), "tolerations": list(tolerations)}


def test_the_slice_keeps_each_devices_taints_and_an_untainted_device_none() -> None:
    devices = {d["name"]: d for d in SLICE["devices"]}
    assert devices["gpu-0"]["taints"] == [
        {
            "key": "gpu.nvidia.com/xid",
            "value": "79",
            "effect": "NoSchedule",
            "timeAdded": TAINTED["slice"]["spec"]["devices"][0]["taints"][0]["timeAdded"],
        }
    ]
    assert devices["gpu-1"]["taints"][0]["effect"] == "None"
    untainted = copy.deepcopy(TAINTED["slice"])
    for device in untainted["spec"]["devices"]:
        device.pop("taints")
    assert all("taints" not in d for d in resource_slice_values(untainted)["devices"])


def test_the_waiting_claim_is_told_which_device_and_taint_keep_it_off() -> None:
    verdict = dra.claim_verdict(WAITING, CLASSES, fleet("rc-taint-first"))
    assert verdict.reason == dra.TAINTED
    assert [(where, t.text) for where, t in verdict.taints] == [
        ("gpu-0 on gpu-h100-01", "gpu.nvidia.com/xid=79:NoSchedule")
    ]
    why = explain_pod(
        namespace="rc-dra",
        name="rc-taint-wait",
        requests={},
        message=TAINTED["message"],
        fleet=FleetView(offered={}, free={}),
        claims=[("rc-taint-wait", verdict)],
    )
    assert why.cause == (
        "The pod's claim rc-taint-wait (device class gpu.nvidia.com) would get a free whole "
        "GPU, but the free ones are tainted and the claim does not tolerate the taint: gpu-0 "
        "on gpu-h100-01 has gpu.nvidia.com/xid=79:NoSchedule (the GPU driver's health check "
        "set it: the GPU reported the fatal XID error 79)."
    )
    assert why.next_step.startswith("It starts when a platform admin clears the taint")


def test_an_informational_taint_keeps_nothing_off() -> None:
    """gpu-1's ``None`` taint did not keep the first claim off it (the scheduler gave it
    gpu-1, gpu-0 being tainted NoSchedule): with nothing taken, the claim fits."""
    assert CLAIMS["rc-taint-first"]["allocated"][0]["device"] == "gpu-1"
    assert dra.claim_verdict(WAITING, CLASSES, fleet()).reason == dra.FITS


def test_a_toleration_that_matches_lets_the_claim_have_the_tainted_device() -> None:
    gpus = fleet("rc-taint-first")
    said = {
        "every key": asking({"key": "", "operator": "Exists", "value": "", "effect": ""}),
        "the key": asking({"key": "gpu.nvidia.com/xid", "operator": "Exists"}),
        "key and value": asking({"key": "gpu.nvidia.com/xid", "operator": "Equal", "value": "79"}),
        "its effect": asking(
            {"key": "gpu.nvidia.com/xid", "operator": "Exists", "effect": "NoSchedule"}
        ),
    }
    for case, request in said.items():
        assert dra.claim_verdict(request, CLASSES, gpus).reason == dra.FITS, case
    refused = {
        "another value": asking({"key": "gpu.nvidia.com/xid", "operator": "Equal", "value": "13"}),
        "another key": asking({"key": "gpu.nvidia.com/gpu-lost", "operator": "Exists"}),
        "another effect": asking(
            {"key": "gpu.nvidia.com/xid", "operator": "Exists", "effect": "NoExecute"}
        ),
    }
    for case, request in refused.items():
        assert dra.claim_verdict(request, CLASSES, gpus).reason == dra.TAINTED, case


def test_a_tainted_device_that_is_taken_is_no_reason() -> None:
    """Both GPUs taken: every matching device is allocated, whatever its taints."""
    gpus = dra.gpus_of([SLICE], {(d.driver, d.pool, d.name) for d in dra.devices_of(SLICE)})
    assert dra.claim_verdict(WAITING, CLASSES, gpus).reason == dra.ALL_TAKEN


def test_the_pages_count_a_tainted_device_apart_and_draw_it_not_free() -> None:
    gpus = fleet("rc-taint-first")
    (offer,) = dra.offers(gpus)
    assert (offer.devices, offer.taken, offer.available, offer.tainted) == (2, 1, 0, 1)
    (untouched,) = dra.offers(dra.gpus_of([SLICE], set()))
    assert (untouched.available, untouched.tainted) == (1, 1)  # gpu-1's "None" is no block
    by_device = {g.key: g for g in gpus}
    strip = dra.strip(by_device["GPU-h100-01-0"], 0)
    assert [(s.busy, s.label) for s in strip.slices] == [
        (None, "whole GPU (tainted gpu.nvidia.com/xid=79:NoSchedule)")
    ]
    assert [s.busy for s in dra.strip(by_device["GPU-h100-01-1"], 1).slices] == [True]


def test_a_partitionable_gpu_whose_free_devices_are_all_tainted_offers_nothing() -> None:
    """The recorded A100 (tests/data/dra/resourceslices.json), every device tainted as the
    driver taints a GPU's devices after a fatal XID: its counters are all left, yet none of
    its devices can be had, and its strip says so."""
    published = json.loads((RECORDED / "resourceslices.json").read_text())
    rows = []
    for item in published:
        item = copy.deepcopy(item)
        for device in item["spec"].get("devices") or ():
            device["taints"] = [{"key": "gpu.nvidia.com/gpu-lost", "effect": "NoSchedule"}]
        rows.append(resource_slice_values(item))
    (a100,) = [g for g in dra.gpus_of(rows, set()) if g.partitionable]
    assert a100.memory_slices() == (8, 8)
    assert a100.kept_off() == dra.Taint("gpu.nvidia.com/gpu-lost", "", "NoSchedule")
    assert [(s.busy, s.label) for s in dra.strip(a100, 0).slices] == [
        (None, "tainted gpu.nvidia.com/gpu-lost:NoSchedule: none of its devices can be had")
    ]
    assert all(o.available == 0 and o.tainted == o.devices for o in dra.offers([a100]))
