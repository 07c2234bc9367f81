"""Why a pod's DRA claim waits, explained from what a real API server and its real scheduler
(Kubernetes 1.36) answered: tests/data/dra/waiting.json, recorded by
tests/realcluster/test_dra_waits.py over the slices and classes of resourceslices.json and
deviceclasses.json. The scheduler says "cannot allocate all claims" whatever the reason (but
for an unknown class); the explanation reads which reason holds from the devices, the
allocations and the classes, in one sentence with its next step."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cluster import dra
from cluster.decode import (
    device_class_values,
    pod_gpu_requests,
    pod_values,
    resource_claim_values,
    resource_slice_values,
)
from diagnostics.explain import Explanation, FleetView, explain_pod

RECORDED = Path(__file__).resolve().parents[2] / "data" / "dra"
WAITING = json.loads((RECORDED / "waiting.json").read_text())
SLICES = [
    resource_slice_values(s) for s in json.loads((RECORDED / "resourceslices.json").read_text())
]
CLASSES = {
    v["name"]: v["selectors"]
    for v in (
        device_class_values(c) for c in json.loads((RECORDED / "deviceclasses.json").read_text())
    )
}
CLAIMS = {c["metadata"]["name"]: resource_claim_values(c) for c in WAITING["claims"]}
PODS = {p["metadata"]["name"]: p for p in WAITING["pods"]}
FLEET = FleetView(offered={}, free={})


def gpus() -> list[dra.Gpu]:
    taken = dra.taken_devices(c["allocated"] for c in CLAIMS.values())
    return dra.gpus_of(SLICES, taken)


def why(name: str) -> Explanation:
    pod = PODS[name]
    values = pod_values(pod, pod_gpu_requests(pod))
    fleet = gpus()
    verdicts = [
        (claim["name"], dra.claim_verdict(request, CLASSES, fleet))
        for asked in values["resource_claims"]
        for claim in [CLAIMS[asked["claim"]]]
        if claim["state"] == "pending"
        for request in claim["requests"]
    ]
    return explain_pod(
        namespace=values["namespace"],
        name=name,
        requests=values["gpu_requests"],
        message=values["pending_message"],
        fleet=FLEET,
        claims=verdicts,
    )


def test_a_pod_records_its_claims_named_or_made_from_a_template() -> None:
    assert pod_values(PODS["rc-templated"], {})["resource_claims"] == [
        {
            "name": "gpu",
            "claim": PODS["rc-templated"]["status"]["resourceClaimStatuses"][0][
                "resourceClaimName"
            ],
            "template": "rc-mig-template",
        }
    ]
    assert pod_values(PODS["rc-wait-taken"], {})["resource_claims"] == [
        {"name": "gpu", "claim": "rc-wait-taken", "template": ""}
    ]


@pytest.mark.parametrize(
    ("pod", "cause", "step"),
    [
        (
            "rc-wait-class",
            "The cluster has no device class no-such.nvidia.com, which the pod's claim "
            "rc-wait-class asks for.",
            "Ask for one of the device classes the cluster has (gpu.nvidia.com, mig.nvidia.com) "
            "in the claim or its template, or ask a platform admin to install the DRA driver "
            "that defines it.",
        ),
        (
            "rc-wait-nomatch",
            "No device published through DRA matches the pod's claim rc-wait-nomatch (device "
            "class gpu.nvidia.com): no node offers what its selectors ask for.",
            "Ask for a device the fleet has (the node pages list the DRA devices; kubectl -n "
            "rc-dra get resourceclaim rc-wait-nomatch -o yaml shows the selectors), or ask a "
            "platform admin for such GPUs.",
        ),
        (
            "rc-wait-taken",
            "Every whole GPU that the pod's claim rc-wait-taken (device class gpu.nvidia.com) "
            "matches is allocated to other claims (2 of 2).",
            "It starts when one of them is released; a smaller device (a MIG profile) may be "
            "free sooner.",
        ),
        (
            "rc-wait-counters",
            "The whole GPU that the pod's claim rc-wait-counters (device class gpu.nvidia.com) "
            "matches is free but cannot be had: MIG devices allocated on the same GPU hold its "
            "shared counters (memory slices, multiprocessors).",
            "It starts when those MIG devices are released; a MIG profile that fits in what the "
            "GPU has left would start now (the node page shows the counters left).",
        ),
    ],
)
def test_each_reason_a_claim_waits_is_said_with_its_next_step(
    pod: str, cause: str, step: str
) -> None:
    said = why(pod)
    assert (said.cause, said.next_step) == (cause, step)
    assert said.evidence == [WAITING["messages"][pod]]
    assert said.topic == "dra-claim"


def test_a_claim_that_asks_for_more_than_match_can_never_start() -> None:
    request = {"name": "gpu", "device_class": "gpu.nvidia.com", "mode": "ExactCount", "count": 3}
    request["selectors"] = [
        "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA H100 80GB HBM3'"
    ]
    verdict = dra.claim_verdict(request, CLASSES, gpus())
    assert (verdict.reason, verdict.matching, verdict.wanted) == (dra.TOO_FEW, 2, 3)
    said = explain_pod(
        namespace="rc-dra",
        name="big",
        requests={},
        message=WAITING["messages"]["rc-wait-taken"],
        fleet=FLEET,
        claims=[("big-gpu", verdict)],
    )
    assert said.cause == (
        "The pod's claim big-gpu (device class gpu.nvidia.com) asks for 3 devices, and only 2 "
        "whole GPU match in the whole cluster."
    )
    assert said.never


def test_a_selector_this_reading_does_not_evaluate_leaves_the_schedulers_words() -> None:
    request: dict[str, Any] = {
        "name": "gpu",
        "device_class": "gpu.nvidia.com",
        "mode": "ExactCount",
        "count": 1,
        "selectors": ["device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi')) >= 0"],
    }
    verdict = dra.claim_verdict(request, CLASSES, gpus())
    assert verdict.reason == dra.UNKNOWN
    said = explain_pod(
        namespace="rc-dra",
        name="p",
        requests={},
        message=WAITING["messages"]["rc-wait-taken"],
        fleet=FLEET,
        claims=[("c", verdict)],
    )
    assert "claim" not in said.cause


def test_the_partitionable_gpu_counts_what_its_counters_leave() -> None:
    (a100,) = [g for g in gpus() if g.partitionable]
    assert a100.memory_slices() == (4, 8)
    by_name = {d.name: d for d in a100.devices}
    assert [d.name for d in a100.taken] == ["gpu-0-mig-3g40gb-9-0"]
    assert a100.available(by_name["gpu-0-mig-3g40gb-9-4"])
    assert not a100.available(by_name["gpu-0"])
    strip = dra.strip(a100, 0)
    assert strip.label == (
        "gpu-0-counter-set (by DRA): 3g.40gb (in use), counters left: 4 of 8 memory slices"
    )
    assert [(s.width, s.busy) for s in strip.slices] == [(3, True), (4, False)]
    offers = {(o.product, o.what): (o.devices, o.taken, o.available) for o in dra.offers(gpus())}
    assert offers == {
        ("NVIDIA A100-SXM4-80GB", "whole GPU"): (1, 0, 0),
        ("NVIDIA A100-SXM4-80GB", "3g.40gb"): (2, 1, 1),
        ("NVIDIA H100 80GB HBM3", "whole GPU"): (2, 2, 0),
    }


# tests/data/dra/apart.json: what the real scheduler said of a claim for three whole GPUs (two
# H100s on one node, the A100 on another: three in the fleet, two at most on a node) and of a
# pod whose two claims ask for both H100s and a 3g.40gb slice of the A100; nothing allocated.
APART = json.loads((RECORDED / "apart.json").read_text())
APART_CLAIMS = {c["metadata"]["name"]: resource_claim_values(c) for c in APART["claims"]}


def apart_why(name: str, claims: list[tuple[str, dra.ClaimVerdict]]) -> Explanation:
    return explain_pod(
        namespace="rc-dra",
        name=name,
        requests={},
        message=APART["messages"][name],
        fleet=FLEET,
        claims=claims,
    )


def test_a_claims_devices_must_be_on_one_node_not_the_fleet_in_sum() -> None:
    fleet = dra.gpus_of(SLICES, set())
    (request,) = APART_CLAIMS["rc-spread"]["requests"]
    verdict = dra.claim_verdict(request, CLASSES, fleet)
    assert (verdict.reason, verdict.wanted, verdict.matching, verdict.on_a_node) == (
        dra.TOO_FEW,
        3,
        3,
        2,
    )
    said = apart_why("rc-spread", [("rc-spread", verdict)])
    assert (said.cause, said.next_step) == (
        "The pod's claim rc-spread (device class gpu.nvidia.com) asks for 3 devices on one node "
        "(a claim's devices are all on the node its pod runs on), and at most 2 whole GPU match "
        "on any one node (3 in the whole cluster).",
        "Ask for at most 2 in the claim, and split the work into pods of that many devices each "
        "(kubectl -n rc-dra get resourceclaim rc-spread -o yaml).",
    )
    assert said.never and said.evidence == [APART["messages"]["rc-spread"]]


def test_a_pods_claims_must_be_on_one_node_together() -> None:
    fleet = dra.gpus_of(SLICES, set())
    claims = [(n, APART_CLAIMS[n]["requests"]) for n in ("rc-apart-h100", "rc-apart-mig")]
    said = [(n, dra.claim_verdict(r, CLASSES, fleet)) for n, asked in claims for r in asked]
    assert [v.reason for _, v in said] == [dra.FITS, dra.FITS]  # each alone would be had
    verdicts = dra.apart(claims, said, CLASSES, fleet, lambda: fleet)
    assert [(n, v.reason, v.never) for n, v in verdicts] == [
        ("rc-apart-h100, rc-apart-mig", dra.APART, True)
    ]
    explained = apart_why("rc-apart", [*verdicts, *said])
    assert explained.cause == (
        "Each of the pod's claims could be had on some node, but no node has all of them free "
        "together (rc-apart-h100: 2 whole GPU, rc-apart-mig: 1 3g.40gb): a pod's claims are all "
        "allocated on the node it runs on."
    )
    assert explained.never
    # two claims one node serves together are not apart
    alone = [claims[0], ("more", [{**claims[1][1][0], "device_class": "gpu.nvidia.com"}])]
    assert dra.together([r for _, asked in alone for r in asked], CLASSES, fleet) is False
    assert dra.together(claims[0][1], CLASSES, fleet) is True


def test_free_devices_spread_over_nodes_do_not_serve_one_claim() -> None:
    h100 = next(s for s in SLICES if s["devices"] and "h100" in s["node_name"])
    taken = {(h100["driver"], h100["pool"], "gpu-0")}
    fleet = dra.gpus_of(SLICES, taken)
    request = {"name": "gpu", "device_class": "gpu.nvidia.com", "mode": "ExactCount", "count": 2}
    verdict = dra.claim_verdict(request, CLASSES, fleet)
    assert (verdict.reason, verdict.free_on_a_node, verdict.taken) == (dra.ALL_TAKEN, 1, 1)
    said = apart_why("rc-spread", [("two", verdict)])
    assert said.cause == (
        "The pod's claim two (device class gpu.nvidia.com) asks for 2 whole GPU on one node (a "
        "claim's devices are all on the node its pod runs on), and no node has that many free: "
        "at most 1 on any one node (1 of 3 allocated in the whole cluster)."
    )
    assert not said.never
