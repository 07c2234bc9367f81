"""The poll's fetch, fed what a real cluster answered (tests/data, verbatim): Kueue's
visibility API gives the places in line; a FailedCreate event whose Job is gone is not
kept (the explanation goes with the Job)."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from cluster.models import Cluster
from cluster.scope import settings_cluster
from gpus.labels import DEVICE_PLUGIN_APP
from kube import NotFound, ObjectRef, PermanentKubeError
from loop.fetch import VISIBILITY_AT_ONCE, device_plugin_nodes, live_failures, queue_positions
from tests.factories import ClusterQueueFactory, LocalQueueFactory, NamespaceFactory
from tests.unit.diagnostics.recorded import k8s, kueue


class Recorded:
    """Answers the fetch's GETs from the recordings (or as told)."""

    def __init__(self, jobs: dict[tuple[str, str], Any] | None = None) -> None:
        self.jobs = jobs or {}
        self.asked: list[str] = []

    def pending_workloads(self, name: str) -> list[dict[str, Any]]:
        self.asked.append(name)
        if name != "rc-cq-team-a":
            raise NotFound(f'clusterqueues.kueue.x-k8s.io "{name}" not found', status=404)
        return list(kueue("visibility-clusterqueue-pendingworkloads.json")["items"])

    def get(self, ref: ObjectRef) -> dict[str, Any]:
        self.asked.append(str(ref))
        answer = self.jobs.get((ref.namespace, ref.name))
        if isinstance(answer, Exception):
            raise answer
        if answer is None:
            raise NotFound(f'jobs.batch "{ref.name}" not found', status=404)
        return {"metadata": {"name": ref.name, "namespace": ref.namespace, "uid": answer}}


@pytest.mark.django_db
def test_the_visibility_apis_answer_gives_the_places_in_line() -> None:
    ClusterQueueFactory(name="rc-cq-team-a")
    ClusterQueueFactory(name="rc-cq-not-applied-yet")
    gateway = Recorded()
    assert queue_positions(gateway, settings_cluster()) == {  # type: ignore[arg-type]
        ("rc-team-a", "job-rc-train-8gpu-a148b"): (0, 0)
    }
    assert sorted(gateway.asked) == ["rc-cq-not-applied-yet", "rc-cq-team-a"]


@pytest.mark.django_db
def test_the_visibility_api_is_asked_about_the_polled_clusters_queues_only() -> None:
    """A ClusterQueue of another cluster is not asked about: the gateway reaches one
    cluster, and a queue of the same name elsewhere is not this one's."""
    here = settings_cluster()
    there = Cluster.objects.create(name="other", display_name="Other", connection="token")
    ClusterQueueFactory(name="rc-cq-team-a", cluster=here)
    ClusterQueueFactory(name="rc-cq-only-there", cluster=there)
    gateway = Recorded()
    assert queue_positions(gateway, here) == {  # type: ignore[arg-type]
        ("rc-team-a", "job-rc-train-8gpu-a148b"): (0, 0)
    }
    assert gateway.asked == ["rc-cq-team-a"]
    gateway = Recorded()
    assert queue_positions(gateway, there) == {}  # type: ignore[arg-type]
    assert gateway.asked == ["rc-cq-only-there"]


@pytest.mark.django_db
def test_only_the_queues_a_listed_workload_waits_in_are_asked_about() -> None:
    """Kueue's own Workloads (recorded): the pending one's LocalQueue points at
    ``rc-cq-team-a``, which is asked; a queue whose workloads all hold quota, or have
    finished, or that nothing names, is not; a waiting workload naming a LocalQueue the
    portal does not know has every queue asked (it may wait in any)."""
    here = settings_cluster()
    team_a = NamespaceFactory(name="rc-team-a", cluster=here)
    team_b = NamespaceFactory(name="rc-team-b", cluster=here)
    LocalQueueFactory(
        name="rc-team-a-queue",
        namespace=team_a,
        cluster_queue=ClusterQueueFactory(name="rc-cq-team-a"),
    )
    busy = ClusterQueueFactory(name="rc-cq-all-admitted")
    LocalQueueFactory(name="rc-team-b-queue", namespace=team_b, cluster_queue=busy)
    ClusterQueueFactory(name="rc-cq-idle")
    pending = kueue("workload-pending.json")
    admitted_elsewhere = kueue("workload-admitted.json")
    admitted_elsewhere["metadata"]["namespace"] = "rc-team-b"
    admitted_elsewhere["spec"]["queueName"] = "rc-team-b-queue"
    finished = kueue("workload-pending.json")
    finished["metadata"] |= {"namespace": "rc-team-b", "name": "done"}
    finished["spec"]["queueName"] = "rc-team-b-queue"
    finished["status"]["conditions"].append({"type": "Finished", "status": "True"})

    gateway = Recorded()
    positions = queue_positions(gateway, here, [pending, admitted_elsewhere, finished])  # type: ignore[arg-type]
    assert positions == {("rc-team-a", "job-rc-train-8gpu-a148b"): (0, 0)}
    assert gateway.asked == ["rc-cq-team-a"]

    gateway = Recorded()
    assert queue_positions(gateway, here, [admitted_elsewhere, finished]) == {}  # type: ignore[arg-type]
    assert gateway.asked == []

    stranger = kueue("workload-pending.json")
    stranger["spec"]["queueName"] = "made-by-hand"
    gateway = Recorded()
    queue_positions(gateway, here, [stranger])  # type: ignore[arg-type]
    assert sorted(gateway.asked) == ["rc-cq-all-admitted", "rc-cq-idle", "rc-cq-team-a"]


class Slow(Recorded):
    """Kueue's visibility API answered a little later each time, as a real API server
    does (its aggregation layer asks Kueue); optionally not served at all."""

    def __init__(self, served: bool = True) -> None:
        super().__init__()
        self.served = served
        self.in_flight = self.most_in_flight = 0
        self.lock = threading.Lock()

    def pending_workloads(self, name: str) -> list[dict[str, Any]]:
        with self.lock:
            self.in_flight += 1
            self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            time.sleep(0.05)
            if not self.served:
                self.asked.append(name)
                raise NotFound("the server could not find the requested resource", status=404)
            return super().pending_workloads(name)
        finally:
            with self.lock:
                self.in_flight -= 1


@pytest.mark.django_db
def test_the_queues_are_asked_a_few_at_a_time_and_answer_in_their_order() -> None:
    """Forty queues with waiting work: asked VISIBILITY_AT_ONCE at a time (never more), the
    places read as when asked one by one; where the API is not served, the first answer
    ends it and the requests not yet sent are dropped."""
    here = settings_cluster()
    names = ["rc-cq-team-a", *(f"rc-cq-{i:02}" for i in range(39))]
    for name in names:
        ClusterQueueFactory(name=name)
    gateway = Slow()
    assert queue_positions(gateway, here) == {  # type: ignore[arg-type]
        ("rc-team-a", "job-rc-train-8gpu-a148b"): (0, 0)
    }
    assert sorted(gateway.asked) == sorted(names)
    assert gateway.most_in_flight == VISIBILITY_AT_ONCE

    gateway = Slow(served=False)
    assert queue_positions(gateway, here) == {}  # type: ignore[arg-type]
    assert len(gateway.asked) < len(names) / 2, gateway.asked


def failed_create(name: str, uid: str, kind: str = "Job") -> dict[str, Any]:
    """A FailedCreate event as the Job controller writes it (the refusal: f3's words)."""
    return {
        "involvedObject": {"kind": kind, "namespace": "team-a", "name": name, "uid": uid},
        "reason": "FailedCreate",
        "message": "Error creating: " + k8s("f3-create-pod-exceeds-quota-403")["message"],
    }


def test_a_failed_create_goes_with_its_job() -> None:
    events = [
        failed_create("still-there", "u1"),
        failed_create("still-there", "u1"),  # one GET per Job
        failed_create("deleted", "u2"),
        failed_create("recreated", "old-uid"),
        failed_create("web-7d4b9", "u4", kind="ReplicaSet"),  # not checked: kept
    ]
    gateway = Recorded({("team-a", "still-there"): "u1", ("team-a", "recreated"): "new-uid"})
    kept = live_failures(gateway, events)  # type: ignore[arg-type]
    assert [(e["involvedObject"]["name"]) for e in kept] == [
        "still-there",
        "still-there",
        "web-7d4b9",
    ]
    assert gateway.asked == [
        "Job team-a/still-there",
        "Job team-a/deleted",
        "Job team-a/recreated",
    ]


def test_without_leave_to_read_jobs_every_failure_is_kept() -> None:
    refused = PermanentKubeError('jobs.batch "a" is forbidden', status=403)
    gateway = Recorded({("team-a", "a"): refused})
    events = [failed_create("a", "u"), failed_create("b", "u")]
    assert live_failures(gateway, events) == events  # type: ignore[arg-type]
    assert gateway.asked == ["Job team-a/a"]  # one refusal ends the checks


def test_the_device_plugin_nodes_are_those_its_running_pods_are_on(settings: Any) -> None:
    """The GPU Operator's device plugin pods (its namespace, the operand's app label) that
    run, counted by node: two pods on one node count once; a pending one, one in another
    namespace, one with another label and one on no node do not count."""
    settings.QM_GPU_OPERATOR_NAMESPACE = "gpu-operator"

    def pod(
        node: str,
        *,
        namespace: str = "gpu-operator",
        app: str = DEVICE_PLUGIN_APP,
        phase: str = "Running",
    ) -> dict[str, Any]:
        return {
            "metadata": {"namespace": namespace, "labels": {"app": app}},
            "spec": {"nodeName": node} if node else {},
            "status": {"phase": phase},
        }

    pods = [
        pod("gpu-1"),
        pod("gpu-1"),
        pod("gpu-2"),
        pod("gpu-3", phase="Pending"),
        pod("gpu-4", namespace="kube-system"),
        pod("gpu-5", app="nvidia-dcgm-exporter"),
        pod(""),
        {"metadata": {}},
    ]
    assert device_plugin_nodes(pods) == 2
    settings.QM_GPU_OPERATOR_NAMESPACE = "kube-system"
    assert device_plugin_nodes(pods) == 1
