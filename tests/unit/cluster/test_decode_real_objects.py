"""The poller's decoding, fed the objects recorded from a real cluster with real Kueue
v0.19.2 (tests/data/kueue-samples and tests/data/k8s-api-samples, verbatim): nodes, pods,
events, Workloads, ClusterQueue / LocalQueue / Cohort status. (No Volcano PodGroup was
recorded.) The visibility API's answer goes through the poll's fetch in
tests/unit/loop/test_fetch_real_objects.py."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest

from cluster.decode import (
    create_failure_values,
    decode_pods,
    node_values,
    observed_object_values,
    pod_gpu_requests,
    pod_values,
    workload_values,
)
from tests.unit.diagnostics.recorded import evicted_by_kueue, k8s, kueue

UTC = dt.UTC

SAMPLES = Path(__file__).resolve().parents[2] / "data" / "kueue-samples"


def recorded(name: str) -> dict[str, Any]:
    return json.loads((SAMPLES / name).read_text())  # type: ignore[no-any-return]


def test_a_kueue_admitted_jobs_pod_is_in_its_local_queue() -> None:
    """Kueue labels the pods of a Job it admitted with local-queue-name, not queue-name."""
    pod = recorded("pod-4gpu-bound.json")
    assert "kueue.x-k8s.io/queue-name" not in pod["metadata"]["labels"]
    values = pod_values(pod, pod_gpu_requests(pod))
    assert values["queue_name"] == "rc-team-a-queue"
    assert values["node_name"] and values["phase"]


def test_a_pod_labelled_with_its_queue_keeps_that_queue() -> None:
    pod = recorded("pod-4gpu-bound.json")
    pod["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] = "asked-for"
    assert pod_values(pod, pod_gpu_requests(pod))["queue_name"] == "asked-for"


def test_an_unschedulable_pod_says_what_the_scheduler_said() -> None:
    pod = recorded("pod-unschedulable.json")
    values = pod_values(pod, pod_gpu_requests(pod))
    assert values["pending_reason"] == "Unschedulable"
    assert values["pending_message"].startswith("0/")


def test_a_kueue_admitted_jobs_pod_names_its_workload() -> None:
    """Kueue's annotation links the pod to its Workload (finding 8)."""
    pod = recorded("pod-4gpu-bound.json")
    values = pod_values(pod, pod_gpu_requests(pod))
    assert (values["workload_name"], values["queue_name"], values["node_name"]) == (
        "job-rc-train-4gpu-b1845",
        "rc-team-a-queue",
        "gpu-h100-01",
    )
    assert values["gpu_requests"] == {"nvidia.com/gpu": 4}
    assert (values["phase"], values["pending_reason"], values["pending_message"]) == (
        "Pending",
        "",
        "",
    )


def test_a_jobs_pod_names_its_job_and_since_when_it_runs() -> None:
    """The controller's ownerReference joins a pod to the Job that cannot create the rest;
    ``status.startTime`` (set when the kubelet takes it on) says since when it runs."""
    pod = recorded("pod-4gpu-bound.json")
    values = pod_values(pod, pod_gpu_requests(pod))
    assert (values["owner_kind"], values["owner_name"], values["started_at"]) == (
        "Job",
        "rc-train-4gpu",
        None,
    )
    pod["status"]["startTime"] = "2026-12-01T09:26:25Z"
    pod["metadata"]["ownerReferences"][0]["controller"] = False  # an owner, not its controller
    values = pod_values(pod, pod_gpu_requests(pod))
    assert (values["owner_kind"], values["started_at"]) == ("", "2026-12-01T09:26:25Z")


def test_the_recorded_nodes_decode_to_their_gpus_layouts_and_taints() -> None:
    rows = {n["metadata"]["name"]: node_values(n, {}, "pool") for n in kueue("nodes.json")["items"]}
    assert {
        name: (r["gpu_product"], r["gpu_count"], r["mig_config"], r["mig_config_state"])
        for name, r in rows.items()
    } == {
        "gpu-a100-01": ("NVIDIA-A100-SXM4-80GB", 8, "all-3g.40gb", "success"),
        "gpu-a100-02": ("NVIDIA-A100-SXM4-80GB", 8, "all-3g.40gb", "success"),
        "gpu-a100-03": ("NVIDIA-A100-SXM4-80GB", 8, "all-balanced", "failed"),
        "gpu-h100-01": ("NVIDIA-H100-80GB-HBM3", 8, "all-disabled", "success"),
        "gpu-h100-02": ("NVIDIA-H100-80GB-HBM3", 8, "all-disabled", "success"),
    }
    assert rows["gpu-a100-03"]["allocatable"]["nvidia.com/mig-1g.10gb"] == "16"
    assert rows["gpu-h100-01"]["taints"] == [
        {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
    ]
    assert all(
        r["ready"] and r["mig_capable"] and r["mig_strategy"] == "mixed" for r in rows.values()
    )
    # The one GET of a node decodes the same way.
    assert (
        node_values(k8s("x3-get-node"), {}, "pool")["allocatable"]["nvidia.com/mig-3g.40gb"] == "16"
    )


def test_the_recorded_pod_lists_decode_to_rows_and_allocations() -> None:
    """b8: two pods bound to gpu-a100-01 and Pending (no kubelet), PodScheduled True."""
    pods = k8s("b8-list-pods-field-selector-node-and-phase")["items"]
    decoded = decode_pods(pods)
    assert set(decoded.allocated) == {"gpu-a100-01"}
    assert all(
        r["node_name"] == "gpu-a100-01" and r["pending_message"] == ""
        for r in decoded.rows.values()
    )
    # Listed again at the same resourceVersions: the same allocations, no row decoded again;
    # one pod at another version is.
    stored = {
        key: (row["decoded_from"], row["node_name"], row["gpu_requests"])
        for key, row in decoded.rows.items()
    }
    again = decode_pods(pods, stored)
    assert (again.allocated, again.rows, again.unchanged) == (decoded.allocated, {}, set(stored))
    first = next(iter(stored))
    source, node, gpu = stored[first]
    moved = decode_pods(pods, {**stored, first: (source.replace(":", ":x", 1), node, gpu)})
    assert set(moved.rows) == {first}
    assert moved.unchanged == set(stored) - {first}
    assert moved.allocated == decoded.allocated
    unscheduled = decode_pods([k8s("e1c-pod-unschedulable-mig-3g")]).rows
    (row,) = unscheduled.values()
    assert (row["name"], row["gpu_requests"], row["pending_reason"]) == (
        "train-3g",
        {"nvidia.com/mig-3g.40gb": 1},
        "Unschedulable",
    )


def test_an_admitted_workload() -> None:
    values = workload_values(kueue("workload-admitted.json"))
    assert {
        k: values[k] for k in ("cluster_queue", "admitted", "finished", "reason", "message")
    } == {
        "cluster_queue": "rc-cq-team-a",
        "admitted": True,
        "finished": False,
        "reason": "",
        "message": "",
    }
    assert values["requests"] == {"cpu": 1, "memory": 1024**3, "nvidia.com/gpu": 4}
    assert values["flavors"] == {"cpu": "rc-h100", "memory": "rc-h100", "nvidia.com/gpu": "rc-h100"}
    assert (
        values["admitted_at"]
        == values["created_at"]
        == dt.datetime(2026, 12, 1, 9, 26, 23, tzinfo=UTC)
    )
    assert values["queued_at"] == values["created_at"]
    assert (values["pods_ready"], values["evictions"], values["evicted_at"]) == (False, 0, None)


def test_a_pending_workload_and_a_borrowing_one() -> None:
    pending = workload_values(kueue("workload-pending.json"))
    assert (pending["admitted"], pending["cluster_queue"], pending["reason"]) == (
        False,
        "",
        "Pending",
    )
    assert pending["message"] == (
        "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu "
        "in flavor rc-h100, 4 more needed"
    )
    assert (pending["requests"]["nvidia.com/gpu"], pending["admitted_at"]) == (8, None)
    assert pending["flavors"] == {}
    borrowing = workload_values(kueue("workload-borrowing.json"))
    assert (borrowing["cluster_queue"], borrowing["requests"]["nvidia.com/gpu"]) == (
        "rc-cq-team-b",
        6,
    )


@pytest.mark.parametrize(
    ("requeued", "readmitted", "expected"),
    [
        # Evicted, backing off: the wait runs from the eviction, no admission.
        (False, False, (2, "PodsReadyTimeout", "09:56:23", "09:57:23", "09:56:23", None)),
        # Back in line: the wait runs from the requeue.
        (True, False, (2, "PodsReadyTimeout", "09:56:23", None, "09:57:23", None)),
        # Admitted again: the admission is the latest, the wait still from the requeue.
        (True, True, (2, "PodsReadyTimeout", None, None, "09:57:23", "09:58:00")),
    ],
)
def test_a_workload_kueue_evicted_after_its_pods_ready_timeout(
    requeued: bool, readmitted: bool, expected: tuple[Any, ...]
) -> None:
    values = workload_values(evicted_by_kueue(requeued=requeued, readmitted=readmitted, times=2))

    def clock(value: dt.datetime | None) -> str | None:
        return value.strftime("%H:%M:%S") if value else None

    assert (
        values["evictions"],
        values["evicted_reason"],
        clock(values["evicted_at"]),
        clock(values["requeue_at"]),
        clock(values["queued_at"]),
        clock(values["admitted_at"]),
    ) == expected
    assert values["admitted"] is readmitted


def test_failed_create_events_are_keyed_by_their_job() -> None:
    """No FailedCreate in the Kueue recording (its quota fits): nothing is kept; a refusal
    as the Job controller words it is keyed by its Job."""
    assert (
        create_failure_values(kueue("events-rc-team-a.json")["items"], now=dt.datetime.now(UTC))
        == {}
    )
    event = {
        "involvedObject": {"kind": "Job", "namespace": "team-a", "name": "job-3", "uid": "u"},
        "message": "Error creating: " + k8s("f3-create-pod-exceeds-quota-403")["message"],
        "count": 3,
        "lastTimestamp": "2026-11-30T10:42:00Z",
    }
    assert create_failure_values([event], now=dt.datetime.now(UTC)) == {
        ("team-a", "Job", "job-3"): {
            "queue_name": "",  # the poll adds the Job's queue when it reads the Job
            "message": event["message"],
            "count": 3,
            "last_seen": dt.datetime(2026, 11, 30, 10, 42, tzinfo=UTC),
        }
    }


@pytest.mark.parametrize(
    "name",
    [
        "clusterqueue-admitted.json",
        "clusterqueue-borrowing.json",
        "clusterqueue-pending.json",
        "localqueue-pending.json",
        "localqueue-borrowing.json",
        "cohort-borrowing.json",
    ],
)
def test_queue_objects_keep_kueues_status_verbatim(name: str) -> None:
    """ClusterQueue, LocalQueue and Cohort as the poll keeps them: the spec that can drift,
    Kueue's status as Kueue wrote it, and who else wrote them."""
    item = kueue(name)
    values = observed_object_values(item, field_manager="qm-recorder")
    assert values["status"] == item.get("status", {})
    assert "status" not in values["spec"] and values["spec"]["spec"] == item["spec"]
    assert [w["manager"] for w in values["changed_by"]] == [
        e["manager"]
        for e in sorted(item["metadata"]["managedFields"], key=lambda e: e["time"], reverse=True)
        if e["manager"] != "qm-recorder" and not e.get("subresource")
    ]
