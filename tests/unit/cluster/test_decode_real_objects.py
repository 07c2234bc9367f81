"""The poller's decoding of pods, fed the objects recorded from a real cluster with real
Kueue v0.19.2 (tests/data/kueue-samples, verbatim)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cluster.decode import pod_gpu_requests, pod_values

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
