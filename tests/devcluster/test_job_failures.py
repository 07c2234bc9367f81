"""The demo cluster's Job controller counts an evicted pod as a failure, as the real one
does (the pod keeps the job-tracking finalizer until it is counted), and fails the Job
past its backoffLimit with the real conditions; with retries left a new pod runs."""

from __future__ import annotations

from typing import Any

from devcluster.scenario import pod
from tests.devcluster.test_recordings import Demo


def start_job(demo: Demo, name: str, backoff_limit: int) -> dict[str, Any]:
    template = pod("x", "team-c", limits={"nvidia.com/gpu": "1"}, labels={"app": name})
    template["spec"]["nodeSelector"] = {"kubernetes.io/hostname": "gpu-h100-02"}
    template["spec"]["tolerations"] = [{"key": "nvidia.com/gpu", "operator": "Exists"}]
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": "team-c"},
        "spec": {
            "backoffLimit": backoff_limit,
            "template": {"metadata": {"labels": {"app": name}}, "spec": template["spec"]},
        },
    }
    assert demo.call("POST", "/apis/batch/v1/namespaces/team-c/jobs", job).status == 201
    demo.settle()
    (running,) = pods_of(demo, name)
    assert running["status"]["phase"] == "Running"
    assert running["metadata"]["finalizers"] == ["batch.kubernetes.io/job-tracking"]
    return running


def pods_of(demo: Demo, job: str) -> list[dict[str, Any]]:
    items = demo.call("GET", f"/api/v1/namespaces/team-c/pods?labelSelector=job-name={job}")
    return list(items.body["items"])


def job_status(demo: Demo, name: str) -> dict[str, Any]:
    return dict(demo.call("GET", f"/apis/batch/v1/namespaces/team-c/jobs/{name}").body["status"])


def evict(demo: Demo, name: str) -> None:
    body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name}}
    path = f"/api/v1/namespaces/team-c/pods/{name}/eviction"
    assert demo.call("POST", path, body).status == 201


def test_an_evicted_pod_fails_a_job_without_retries_left() -> None:
    demo = Demo()
    running = start_job(demo, "train-once", backoff_limit=0)
    evict(demo, running["metadata"]["name"])
    demo.settle(5)
    status = job_status(demo, "train-once")
    assert status["failed"] == 1
    assert [(c["type"], c["status"], c["reason"], c["message"]) for c in status["conditions"]] == [
        (
            "FailureTarget",
            "True",
            "BackoffLimitExceeded",
            "Job has reached the specified backoff limit",
        ),
        ("Failed", "True", "BackoffLimitExceeded", "Job has reached the specified backoff limit"),
    ]
    # The evicted pod is gone once counted, and no new one starts.
    assert pods_of(demo, "train-once") == []


def test_an_evicted_pod_of_a_job_with_retries_left_is_replaced() -> None:
    demo = Demo()
    first = start_job(demo, "train-retry", backoff_limit=2)
    evict(demo, first["metadata"]["name"])
    demo.settle(5)
    status = job_status(demo, "train-retry")
    assert status["failed"] == 1
    assert not any(c["type"] == "Failed" for c in status.get("conditions") or [])
    (replacement,) = pods_of(demo, "train-retry")
    assert replacement["metadata"]["name"] != first["metadata"]["name"]
    assert "deletionTimestamp" not in replacement["metadata"]


def test_a_stopped_pod_waits_for_its_job_to_count_it() -> None:
    """Until the Job controller has counted it, the stopped pod stays (phase Failed, with
    its finalizer), as the API server keeps an object whose finalizers are not done."""
    demo = Demo()
    running = start_job(demo, "train-slow", backoff_limit=1)
    name = running["metadata"]["name"]
    evict(demo, name)
    demo.controllers._kubelet()  # the kubelet stops it; the Job controller has not run yet
    stopped = demo.call("GET", f"/api/v1/namespaces/team-c/pods/{name}").body
    assert stopped["status"]["phase"] == "Failed"
    assert stopped["metadata"]["finalizers"] == ["batch.kubernetes.io/job-tracking"]
    demo.settle()
    assert demo.call("GET", f"/api/v1/namespaces/team-c/pods/{name}").status == 404
    assert job_status(demo, "train-slow")["failed"] == 1
