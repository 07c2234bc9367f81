"""``DemoCluster.settle``: with the controllers running, it returns once they have acted on
every write made before it (and on what those writes set off), so that a client's LISTs after
it read one state."""

from __future__ import annotations

import json
from typing import Any

import pytest

import devcluster
from devcluster import Options
from tests.devcluster.test_kueue_recordings import KUEUE, job_body, spec_of


def call(cluster: devcluster.DemoCluster, method: str, target: str, body: Any = None) -> Any:
    headers = {"content-type": "application/json", "user-agent": "kubectl-create/v1.36.2"}
    raw = b"" if body is None else json.dumps(body).encode()
    response = cluster.api.handle(method, target, headers, raw)
    assert response.status < 300, response.body
    return response.body


def test_settle_returns_once_the_controllers_acted_on_every_write() -> None:
    # A slow pass (0.2 s): what the writes set off takes two or three of them, so without
    # the wait the workload or its count is missing (not asserted before the wait: a pass
    # may fall between the last write and a read, more likely on a loaded machine).
    cluster = devcluster.start(scenario="empty", options=Options(tick=0.2, retry_seconds=60))
    try:
        call(cluster, "POST", "/api/v1/namespaces", {"metadata": {"name": "team-a"}})
        flavor = {"metadata": {"name": "rc-h100"}, "spec": spec_of("resourceflavor")}
        call(cluster, "POST", f"{KUEUE}/resourceflavors", flavor)
        queue = {"metadata": {"name": "cq-a"}, "spec": spec_of("clusterqueue-empty")}
        call(cluster, "POST", f"{KUEUE}/clusterqueues", queue)
        local = {"metadata": {"name": "lq-a"}, "spec": {"clusterQueue": "cq-a"}}
        call(cluster, "POST", f"{KUEUE}/namespaces/team-a/localqueues", local)
        call(
            cluster,
            "POST",
            "/apis/batch/v1/namespaces/team-a/jobs",
            job_body("rc-train-8gpu", "lq-a"),
        )

        cluster.settle()

        (workload,) = call(cluster, "GET", f"{KUEUE}/namespaces/team-a/workloads")["items"]
        assert workload["metadata"]["ownerReferences"][0]["name"] == "rc-train-8gpu"
        status = call(cluster, "GET", f"{KUEUE}/clusterqueues/cq-a")["status"]
        counted = status["pendingWorkloads"] + status["admittedWorkloads"]
        assert counted == 1, status  # the queue's status counts the workload the LIST shows
    finally:
        cluster.stop()


def test_settle_says_so_when_the_controllers_do_not_catch_up() -> None:
    cluster = devcluster.start(scenario="empty", options=Options(tick=0.05))
    cluster.controllers.stop()
    try:
        with pytest.raises(TimeoutError, match=r"did not settle within 0\.3 s"):
            cluster.settle(timeout=0.3)
    finally:
        cluster.stop()
