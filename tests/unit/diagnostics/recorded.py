"""The recordings of a real cluster (tests/data, verbatim) as the explainer's inputs: the
objects, and the fleet the recording cluster had (its five GPU nodes, decoded by the poller's
own decoder, with what its pods held, as the recordings' READMEs describe)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from cluster.decode import node_values
from diagnostics.explain import FleetView, fleet_view
from fleet.membership import carries

DATA = Path(__file__).resolve().parents[2] / "data"
KUEUE = DATA / "kueue-samples"
K8S = DATA / "k8s-api-samples"


def kueue(name: str) -> Any:
    """An object of tests/data/kueue-samples, as the API server returned it."""
    return json.loads((KUEUE / name).read_text())


def k8s(case: str) -> Any:
    """The response body of a case of tests/data/k8s-api-samples."""
    return json.loads((K8S / f"{case}.json").read_text())["response"]["body"]


# What the recording cluster's pods held (k8s-api-samples/README.md, "The recording
# cluster"): team-b fills both all-3g.40gb nodes and holds 4 mig-1g.10gb on gpu-a100-03,
# team-d holds gpu-h100-01 whole; team-c's two 1-GPU pods run on gpu-h100-02.
HELD = {
    "gpu-a100-01": {"nvidia.com/mig-3g.40gb": 16},
    "gpu-a100-02": {"nvidia.com/mig-3g.40gb": 16},
    "gpu-a100-03": {"nvidia.com/mig-1g.10gb": 4},
    "gpu-h100-01": {"nvidia.com/gpu": 8},
    "gpu-h100-02": {"nvidia.com/gpu": 2},
}
A100_POOL = SimpleNamespace(
    name="train",
    mig_config="all-3g.40gb",
    selector={"quartermaster.io/pool": "train"},
)


def recorded_fleet(
    *, cordoned: tuple[str, ...] = (), held: dict[str, Any] | None = None
) -> FleetView:
    """The explainer's view of the recording cluster: the A100 pool's layout is
    all-3g.40gb, so gpu-a100-03 (all-balanced) has drifted."""
    rows = []
    for node in kueue("nodes.json")["items"]:
        name = node["metadata"]["name"]
        values = node_values(node, dict((HELD if held is None else held).get(name, {})), "pool")
        values["unschedulable"] = values["unschedulable"] or name in cordoned
        rows.append(SimpleNamespace(**values))
    promised = {
        row.name: {"nvidia.com/mig-3g.40gb": 16}
        for row in rows
        if carries(A100_POOL.selector, row.labels)
    }
    return fleet_view(rows, [], [A100_POOL], [], {}, promised)


def evicted_by_kueue(*, requeued: bool, readmitted: bool = False, times: int = 1) -> dict[str, Any]:
    """The recorded admitted Workload after Kueue's PodsReady timeout evicted it (at
    09:56:23, 30 minutes after its admission), with the conditions Kueue writes then (its
    own integration tests show them): backing off until 09:57:23, or requeued then, or
    admitted again at 09:58:00 (Evicted turns False with a "Previously: " message)."""
    workload = copy.deepcopy(kueue("workload-admitted.json"))
    key = "rc-team-a/job-rc-train-4gpu-b1845"
    exceeded = f"Exceeded the PodsReady timeout {key}"
    workload["status"] = {
        "conditions": [
            {
                "type": "PodsReady",
                "status": "False",
                "reason": "PodsReady",
                "message": "Not all pods are ready or succeeded",
                "lastTransitionTime": "2026-12-01T09:26:23Z",
            },
            {
                "type": "QuotaReserved",
                "status": "False",
                "reason": "Pending",
                "message": exceeded,
                "lastTransitionTime": "2026-12-01T09:56:23Z",
            },
            {
                "type": "Evicted",
                "status": "True",
                "reason": "PodsReadyTimeout",
                "message": exceeded,
                "lastTransitionTime": "2026-12-01T09:56:23Z",
            },
            {
                "type": "Admitted",
                "status": "False",
                "reason": "NoReservation",
                "message": "The workload has no reservation",
                "lastTransitionTime": "2026-12-01T09:56:23Z",
            },
            {
                "type": "Requeued",
                "status": "True" if requeued else "False",
                "reason": "BackoffFinished" if requeued else "PodsReadyTimeout",
                "message": "The workload backoff was finished" if requeued else exceeded,
                "lastTransitionTime": "2026-12-01T09:57:23Z"
                if requeued
                else "2026-12-01T09:56:23Z",
            },
        ],
        "requeueState": {
            "count": times,
            **({} if requeued else {"requeueAt": "2026-12-01T09:57:23Z"}),
        },
        "schedulingStats": {
            "evictions": [{"reason": "PodsReadyTimeout", "underlyingCause": "", "count": times}]
        },
        "resourceRequests": workload["status"].get("resourceRequests", []),
    }
    if readmitted:
        admitted = kueue("workload-admitted.json")["status"]
        workload["status"]["admission"] = admitted["admission"]
        again = "2026-12-01T09:58:00Z"
        for condition in workload["status"]["conditions"]:
            if condition["type"] == "QuotaReserved":
                condition.update(
                    status="True",
                    reason="QuotaReserved",
                    lastTransitionTime=again,
                    message="Quota reserved in ClusterQueue rc-cq-team-a",
                )
            elif condition["type"] == "Admitted":
                condition.update(
                    status="True",
                    reason="Admitted",
                    lastTransitionTime=again,
                    message="The workload is admitted",
                )
            elif condition["type"] == "Evicted":
                condition.update(
                    status="False",
                    reason="QuotaReserved",
                    lastTransitionTime=again,
                    message=f"Previously: {exceeded}",
                )
    return workload
