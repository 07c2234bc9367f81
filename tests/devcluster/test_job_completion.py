"""A Job whose pod succeeded, on the demo cluster: its Job controller completes the Job and
its Kueue marks the Workload Finished and gives the quota back, with the same conditions,
counts, words and events as the real control plane (``tests/realcluster/test_finished.py``,
whose facts are ``tests/realcluster/scenarios.py``'s)."""

from __future__ import annotations

import json

from tests.devcluster.test_kueue_recordings import KUEUE, KueueDemo
from tests.realcluster import scenarios


def succeed(demo: KueueDemo, namespace: str, pod: str) -> None:
    """The kubelet's last word on the pod: its containers exited 0."""
    response = demo.api.handle(
        "PATCH",
        f"/api/v1/namespaces/{namespace}/pods/{pod}/status",
        {"content-type": "application/merge-patch+json", "user-agent": "kubelet/v1.36.2"},
        json.dumps({"status": {"phase": "Succeeded"}}).encode(),
    )
    assert response.status == 200, response.body


def test_a_job_whose_pod_succeeded_is_complete_and_its_workload_finished() -> None:
    demo = KueueDemo()
    demo.controllers.options.kubelet_start_seconds = 0  # a kubelet this time
    demo.team_a()
    demo.submit("rc-train-4gpu", "rc-team-a", "rc-team-a-queue")
    cq = f"{KUEUE}/clusterqueues/rc-cq-team-a"
    lq = f"{KUEUE}/namespaces/rc-team-a/localqueues/rc-team-a-queue"
    for queue in (cq, lq):  # held while it runs
        running = scenarios.quota_in_use(demo.get(queue))
        assert (running["admittedWorkloads"], running["in use"]) == (1, {"1", "1Gi", "4"}), running
    pod = demo.pod_of("rc-team-a", "rc-train-4gpu")
    assert pod["status"]["phase"] == "Running"
    succeed(demo, "rc-team-a", pod["metadata"]["name"])
    demo.settle()

    job = demo.get("/apis/batch/v1/namespaces/rc-team-a/jobs/rc-train-4gpu")
    assert scenarios.job_complete(job) == scenarios.JOB_COMPLETE
    workload = demo.workload_of("rc-team-a", "rc-train-4gpu")
    assert scenarios.workload_finished(workload) == scenarios.WORKLOAD_FINISHED
    for queue in (cq, lq):
        assert scenarios.quota_in_use(demo.get(queue)) == scenarios.QUOTA_RELEASED
    name = f"rc-team-a/{workload['metadata']['name']}"
    expected = [
        (kind, reason, message.format(workload=name), component)
        for kind, reason, message, component in scenarios.FINISHED_EVENTS
    ]
    events = demo.get("/api/v1/namespaces/rc-team-a/events")["items"]
    assert scenarios.finished_events(events, "rc-train-4gpu") == expected
    # The pod stays Succeeded, counted: its tracking finalizer is gone, none replaces it.
    done = demo.pod_of("rc-team-a", "rc-train-4gpu")
    assert done["status"]["phase"] == "Succeeded"
    assert "finalizers" not in done["metadata"]


def test_a_job_completes_once_its_succeeded_pods_reach_its_completions() -> None:
    demo = KueueDemo()
    demo.controllers.options.kubelet_start_seconds = 0
    demo.team_a()
    body = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "rc-two"},
        "spec": {
            "parallelism": 1,
            "completions": 2,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10"}],
                }
            },
        },
    }
    demo.ok("POST", "/apis/batch/v1/namespaces/rc-team-a/jobs", body)
    demo.settle()
    first = demo.pod_of("rc-team-a", "rc-two")
    succeed(demo, "rc-team-a", first["metadata"]["name"])
    demo.settle()
    job = demo.get("/apis/batch/v1/namespaces/rc-team-a/jobs/rc-two")
    assert job["status"]["succeeded"] == 1 and job["status"]["active"] == 1
    assert not any(c["type"] == "Complete" for c in job["status"].get("conditions") or [])
    pods = demo.get("/api/v1/namespaces/rc-team-a/pods?labelSelector=job-name%3Drc-two")["items"]
    (second,) = [p for p in pods if p["status"]["phase"] == "Running"]
    succeed(demo, "rc-team-a", second["metadata"]["name"])
    demo.settle()
    job = demo.get("/apis/batch/v1/namespaces/rc-team-a/jobs/rc-two")
    assert job["status"]["succeeded"] == 2 and "active" not in job["status"]
    assert [c["type"] for c in job["status"]["conditions"]] == ["SuccessCriteriaMet", "Complete"]
