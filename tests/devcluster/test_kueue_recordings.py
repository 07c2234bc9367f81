"""The demo cluster's Kueue answers like the real Kueue v0.19.2 recorded in tests/data/kueue-samples.

The recording's own story is replayed through the demo cluster's API: the rc-* namespaces,
ResourceFlavor, ClusterQueues, Cohort and LocalQueues, then the Jobs rc-train-4gpu (admitted),
rc-train-8gpu (pending) and rc-borrow-6gpu (borrowing), and two plain pods that cannot be
scheduled. The nodes are the recorded ones and, as in the recording, no kubelet starts a pod.
Each recorded object is then compared with the demo's, field by field, after ``normalized``
has taken out what differs on every run (uids, resourceVersions, timestamps, generated name
suffixes). Where the demo differs on purpose, the test says so, and devcluster/README.md lists
every case.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest

from devcluster.cluster import Cluster
from devcluster.controllers import Controllers, Options
from devcluster.resources import find
from devcluster.server import API, Response

SAMPLES = Path(__file__).resolve().parent.parent / "data" / "kueue-samples"
KUEUE = "/apis/kueue.x-k8s.io/v1beta2"
VISIBILITY = "/apis/visibility.kueue.x-k8s.io/v1beta2"
NODES = find("", "v1", "nodes")
VOLATILE = {
    "uid",
    "resourceVersion",
    "creationTimestamp",
    "managedFields",
    "lastTransitionTime",
    "lastProbeTime",
    "lastHeartbeatTime",
    "startTime",
    "eventTime",
    "firstTimestamp",
    "lastTimestamp",
    "time",
    "requeueAt",
}
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_GENERATED = re.compile(r"\b(job-rc-[a-z0-9-]+?)-[0-9a-f]{5}\b|\b(rc-[a-z0-9-]+gpu)-[a-z0-9]{5}\b")
_WAITED = re.compile(r"(wait time since (?:queued|reservation) was )\d+s")


def recorded(name: str) -> Any:
    return json.loads((SAMPLES / f"{name}.json").read_text())


def _text(value: str) -> str:
    value = _UUID.sub("<uid>", value)
    value = _GENERATED.sub(lambda m: f"{m.group(1) or m.group(2)}-<suffix>", value)
    return _WAITED.sub(r"\1<n>s", value)


def normalized(obj: Any) -> Any:
    """``obj`` without what differs on every run: uids, resourceVersions, timestamps, the
    generated suffixes of names and the wait times in Kueue's event messages."""
    if isinstance(obj, dict):
        return {_text(k): normalized(v) for k, v in obj.items() if k not in VOLATILE}
    if isinstance(obj, list):
        return [normalized(v) for v in obj]
    if isinstance(obj, str):
        return _text(obj)
    return obj


def assert_same(ours: Any, theirs: Any, *paths: str) -> None:
    """The normalized objects are equal at each dotted path (the whole object if none)."""
    for path in paths or ("",):
        a, b = normalized(ours), normalized(theirs)
        for key in filter(None, path.split(".")):
            a, b = a.get(key), b.get(key)
        assert a == b, path


def conditions(obj: Any) -> dict[str, tuple[str, str, str]]:
    return {
        c["type"]: (c["status"], c.get("reason", ""), c.get("message", ""))
        for c in (obj.get("status") or {}).get("conditions") or []
    }


def event_rows(events: list[Any]) -> list[tuple[str, ...]]:
    rows = []
    for event in normalized(events):
        involved = event["involvedObject"]
        rows.append(
            (
                involved["kind"],
                involved["name"],
                involved.get("apiVersion", ""),
                event["type"],
                event["reason"],
                event["message"],
                event.get("action") or "",
                event.get("reportingComponent", ""),
                json.dumps(event.get("source") or {}),
            )
        )
    return sorted(set(rows))  # a repeated failure is a second event (series not compared)


JOB_SPECS = {"rc-train-4gpu": 4, "rc-train-8gpu": 8, "rc-borrow-6gpu": 6}


def job_body(name: str, queue: str) -> dict[str, Any]:
    """The recorder's Job (``kubectl create``): one 1-CPU, 1Gi pod asking for N GPUs."""
    gpus = str(JOB_SPECS[name])
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "labels": {"kueue.x-k8s.io/queue-name": queue}},
        "spec": {
            "parallelism": 1,
            "completions": 1,
            "backoffLimit": 0,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": "main",
                            "image": "registry.k8s.io/pause:3.10",
                            "resources": {
                                "requests": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": gpus},
                                "limits": {"nvidia.com/gpu": gpus},
                            },
                        }
                    ],
                }
            },
        },
    }


def spec_of(name: str) -> dict[str, Any]:
    return copy.deepcopy(recorded(name)["spec"])


class KueueDemo:
    """An empty demo cluster with the recorded nodes; no kubelet starts a pod."""

    def __init__(self, **options: Any) -> None:
        self.cluster = Cluster()
        self.controllers = Controllers(
            self.cluster,
            Options(
                retry_seconds=0,
                kubelet_start_seconds=1e9,
                kubelet_stop_seconds=0,
                mig_delay_seconds=0,
                **options,
            ),
        )
        self.controllers.install()
        self.api = API(self.cluster, self.controllers)
        for node in recorded("nodes")["items"]:
            node = {k: v for k, v in node.items() if k not in ("kind", "apiVersion")}
            node["metadata"] = {k: node["metadata"][k] for k in ("name", "labels")}
            self.cluster.create(NODES, "", node, manager="kubelet")  # type: ignore[arg-type]
        for namespace in ("rc-team-a", "rc-team-b", "rc-plain"):
            self.ok("POST", "/api/v1/namespaces", {"metadata": {"name": namespace}})

    def call(
        self, method: str, target: str, body: Any = None, *, agent: str = "kubectl-create/v1.36.2"
    ) -> Response:
        headers = {"content-type": "application/json", "user-agent": agent}
        raw = b"" if body is None else json.dumps(body).encode()
        response = self.api.handle(method, target, headers, raw)
        response.body = json.loads(json.dumps(response.body))  # as it goes over the wire
        return response

    def ok(self, method: str, target: str, body: Any = None) -> Any:
        response = self.call(method, target, body)
        assert response.status in (200, 201), response.body
        return response.body

    def get(self, target: str) -> Any:
        return self.ok("GET", target)

    def settle(self, rounds: int = 6) -> None:
        for _ in range(rounds):
            self.controllers.dirty = self.controllers.kueue_dirty = True
            self.controllers.tick()

    def team_a(self) -> None:
        """The first part of the recording: rc-cq-team-a (8 GPUs) and its LocalQueue."""
        self.ok(
            "POST",
            f"{KUEUE}/resourceflavors",
            {"metadata": {"name": "rc-h100"}, "spec": spec_of("resourceflavor")},
        )
        self.ok(
            "POST",
            f"{KUEUE}/clusterqueues",
            {"metadata": {"name": "rc-cq-team-a"}, "spec": spec_of("clusterqueue-empty")},
        )
        self.ok(
            "POST",
            f"{KUEUE}/namespaces/rc-team-a/localqueues",
            {"metadata": {"name": "rc-team-a-queue"}, "spec": {"clusterQueue": "rc-cq-team-a"}},
        )
        self.settle()

    def submit(self, name: str, namespace: str, queue: str) -> Any:
        body = self.ok("POST", f"/apis/batch/v1/namespaces/{namespace}/jobs", job_body(name, queue))
        self.settle()
        return body

    def research(self) -> None:
        """The cohort rc-research: rc-cq-team-b (4 GPUs, borrows) and rc-cq-team-c (lends)."""
        self.ok("POST", f"{KUEUE}/cohorts", {"metadata": {"name": "rc-research"}, "spec": {}})
        for name, sample in (
            ("rc-cq-team-b", "clusterqueue-borrowing"),
            ("rc-cq-team-c", "clusterqueue-lender"),
        ):
            self.ok(
                "POST",
                f"{KUEUE}/clusterqueues",
                {"metadata": {"name": name}, "spec": spec_of(sample)},
            )
        self.ok(
            "POST",
            f"{KUEUE}/namespaces/rc-team-b/localqueues",
            {"metadata": {"name": "rc-team-b-queue"}, "spec": {"clusterQueue": "rc-cq-team-b"}},
        )
        self.settle()

    def workload_of(self, namespace: str, job: str) -> Any:
        items = self.get(f"{KUEUE}/namespaces/{namespace}/workloads")["items"]
        return next(w for w in items if w["metadata"]["ownerReferences"][0]["name"] == job)

    def pod_of(self, namespace: str, job: str) -> Any:
        items = self.get(f"/api/v1/namespaces/{namespace}/pods?labelSelector=job-name%3D{job}")[
            "items"
        ]
        assert len(items) == 1
        return items[0]


@pytest.fixture(scope="module")
def story() -> KueueDemo:
    """The whole recorded story, replayed once (the tests below only read)."""
    demo = KueueDemo()
    demo.team_a()
    demo.created = demo.submit("rc-train-4gpu", "rc-team-a", "rc-team-a-queue")  # type: ignore[attr-defined]
    demo.cq_admitted = demo.get(f"{KUEUE}/clusterqueues/rc-cq-team-a")  # type: ignore[attr-defined]
    demo.lq_admitted = demo.get(f"{KUEUE}/namespaces/rc-team-a/localqueues/rc-team-a-queue")  # type: ignore[attr-defined]
    demo.submit("rc-train-8gpu", "rc-team-a", "rc-team-a-queue")
    demo.research()
    demo.submit("rc-borrow-6gpu", "rc-team-b", "rc-team-b-queue")
    for name, gpus, tolerations in (
        (
            "rc-too-big",
            "9",
            [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        ),
        ("rc-no-toleration", "1", None),
    ):
        container = {
            "name": "main",
            "image": "registry.k8s.io/pause:3.10",
            "resources": {"limits": {"nvidia.com/gpu": gpus}},
        }
        spec: dict[str, Any] = {"containers": [container]}
        if tolerations:
            spec["tolerations"] = tolerations
        demo.ok(
            "POST", "/api/v1/namespaces/rc-plain/pods", {"metadata": {"name": name}, "spec": spec}
        )
    demo.settle()
    return demo


# ----------------------------------------------------------------------------- queues


def test_resource_flavor_gets_kueue_finalizer(story: KueueDemo) -> None:
    ours = story.get(f"{KUEUE}/resourceflavors/rc-h100")
    assert_same(
        ours, recorded("resourceflavor"), "spec", "metadata.finalizers", "metadata.generation"
    )


def test_empty_cluster_queue_status() -> None:
    demo = KueueDemo()
    demo.team_a()
    ours = demo.get(f"{KUEUE}/clusterqueues/rc-cq-team-a")
    assert_same(ours, recorded("clusterqueue-empty"), "spec", "status", "metadata.finalizers")


@pytest.mark.parametrize(
    ("sample", "attribute"),
    [("clusterqueue-admitted", "cq_admitted"), ("localqueue-admitted", "lq_admitted")],
)
def test_queue_status_after_one_admission(story: KueueDemo, sample: str, attribute: str) -> None:
    assert_same(getattr(story, attribute), recorded(sample), "spec", "status")


@pytest.mark.parametrize(
    ("sample", "path"),
    [
        ("clusterqueue-pending", "/clusterqueues/rc-cq-team-a"),
        ("localqueue-pending", "/namespaces/rc-team-a/localqueues/rc-team-a-queue"),
        ("clusterqueue-borrowing", "/clusterqueues/rc-cq-team-b"),
        ("clusterqueue-lender", "/clusterqueues/rc-cq-team-c"),
        ("localqueue-borrowing", "/namespaces/rc-team-b/localqueues/rc-team-b-queue"),
        ("cohort-borrowing", "/cohorts/rc-research"),
    ],
)
def test_queue_and_cohort_status(story: KueueDemo, sample: str, path: str) -> None:
    ours = story.get(KUEUE + path)
    assert_same(ours, recorded(sample), "spec", "status", "metadata.finalizers")


def test_cluster_queue_read_as_v1beta1(story: KueueDemo) -> None:
    ours = story.get("/apis/kueue.x-k8s.io/v1beta1/clusterqueues/rc-cq-team-b")
    assert_same(ours, recorded("clusterqueue-borrowing-v1beta1"), "apiVersion", "spec", "status")


# ----------------------------------------------------------------------------- Jobs, workloads, pods


def test_job_webhook_suspends_a_queued_job(story: KueueDemo) -> None:
    theirs = recorded("job-4gpu-create-response")
    assert_same(story.created, theirs, "spec", "status", "metadata.labels", "metadata.generation")  # type: ignore[attr-defined]


def test_admitted_job_is_unsuspended_with_the_flavor_injected(story: KueueDemo) -> None:
    ours = story.get("/apis/batch/v1/namespaces/rc-team-a/jobs/rc-train-4gpu")
    assert_same(
        ours,
        recorded("job-4gpu-admitted"),
        "spec",
        "status",
        "metadata.labels",
        "metadata.generation",
    )


def test_pending_job_stays_suspended(story: KueueDemo) -> None:
    ours = story.get("/apis/batch/v1/namespaces/rc-team-a/jobs/rc-train-8gpu")
    assert_same(ours, recorded("job-8gpu-pending"), "spec", "status", "metadata.generation")


@pytest.mark.parametrize(
    ("sample", "namespace", "job"),
    [
        ("workload-admitted", "rc-team-a", "rc-train-4gpu"),
        ("workload-pending", "rc-team-a", "rc-train-8gpu"),
        ("workload-borrowing", "rc-team-b", "rc-borrow-6gpu"),
    ],
)
def test_workloads_match(story: KueueDemo, sample: str, namespace: str, job: str) -> None:
    ours = story.workload_of(namespace, job)
    theirs = recorded(sample)
    assert_same(ours, theirs, "metadata", "spec", "status")
    assert conditions(ours) == conditions(theirs)


def test_admitted_jobs_pod_is_bound_with_kueues_labels(story: KueueDemo) -> None:
    ours, theirs = story.pod_of("rc-team-a", "rc-train-4gpu"), recorded("pod-4gpu-bound")
    assert_same(
        ours,
        theirs,
        "metadata.labels",
        "metadata.annotations",
        "metadata.ownerReferences",
        "metadata.finalizers",
        "metadata.generateName",
        "spec.nodeName",
        "spec.nodeSelector",
        "spec.tolerations",
        "spec.priority",
        "spec.restartPolicy",
        "status",
    )
    assert [c["resources"] for c in ours["spec"]["containers"]] == [
        c["resources"] for c in theirs["spec"]["containers"]
    ]


def test_unschedulable_pod(story: KueueDemo) -> None:
    ours = story.get("/api/v1/namespaces/rc-plain/pods/rc-too-big")
    theirs = recorded("pod-unschedulable")
    assert_same(ours, theirs, "status", "spec.tolerations", "spec.priority")
    assert (
        ours["spec"]["containers"][0]["resources"] == theirs["spec"]["containers"][0]["resources"]
    )


def test_events_in_the_team_namespace(story: KueueDemo) -> None:
    ours = story.get("/api/v1/namespaces/rc-team-a/events")["items"]
    assert event_rows(ours) == event_rows(recorded("events-rc-team-a")["items"])


def test_failed_scheduling_events(story: KueueDemo) -> None:
    ours = story.get("/api/v1/namespaces/rc-plain/events")["items"]
    assert event_rows(ours) == event_rows(recorded("events-failedscheduling")["items"])


@pytest.mark.parametrize(
    ("sample", "path"),
    [
        (
            "visibility-clusterqueue-pendingworkloads",
            "/clusterqueues/rc-cq-team-a/pendingworkloads",
        ),
        (
            "visibility-localqueue-pendingworkloads",
            "/namespaces/rc-team-a/localqueues/rc-team-a-queue/pendingworkloads",
        ),
    ],
)
def test_visibility_api(story: KueueDemo, sample: str, path: str) -> None:
    assert normalized(story.get(VISIBILITY + path)) == normalized(recorded(sample))


def test_versions_of_the_kueue_api(story: KueueDemo) -> None:
    groups = story.get("/apis/kueue.x-k8s.io")
    stored = recorded("versions")["kueue-crd-storage-versions"]
    assert groups["preferredVersion"]["version"] == stored["clusterqueues"][0] == "v1beta2"
    assert (
        story.get("/version")["gitVersion"] == recorded("versions")["kube-apiserver"]["gitVersion"]
    )


# ----------------------------------------------------------------------------- rejections


def kubectl_error(response: Response) -> str:
    """The stderr line kubectl prints for an error Status (as recorded in rejections.json)."""
    body = response.body
    details = body.get("details") or {}
    if body.get("reason") == "Invalid" and details.get("causes"):
        causes = "; ".join(f"{c['field']}: {c['message']}" for c in details["causes"])
        return f'The {details["kind"]} "{details["name"]}" is invalid: {causes}'
    return f"Error from server ({body['reason']}): {body['message']}"


def test_rejections_have_the_recorded_texts() -> None:
    demo = KueueDemo()
    demo.team_a()
    demo.submit("rc-train-4gpu", "rc-team-a", "rc-team-a-queue")
    texts = recorded("rejections")
    invalid = spec_of("clusterqueue-empty")
    invalid["resourceGroups"][0]["flavors"][0]["resources"][2]["borrowingLimit"] = "2"
    response = demo.call(
        "POST", f"{KUEUE}/clusterqueues", {"metadata": {"name": "rc-cq-invalid"}, "spec": invalid}
    )
    assert (response.status, kubectl_error(response)) == (
        422,
        texts["ClusterQueue with borrowingLimit but no cohortName"],
    )
    invalid = spec_of("clusterqueue-empty")
    invalid["resourceGroups"][0]["flavors"][0]["resources"].append(
        {"name": "pods", "nominalQuota": "10"}
    )
    response = demo.call(
        "POST", f"{KUEUE}/clusterqueues", {"metadata": {"name": "rc-cq-invalid"}, "spec": invalid}
    )
    assert (response.status, kubectl_error(response)) == (
        422,
        texts["ClusterQueue whose flavor lists a resource not in coveredResources"],
    )
    queue = demo.get(f"{KUEUE}/namespaces/rc-team-a/localqueues/rc-team-a-queue")
    queue["spec"]["clusterQueue"] = "rc-cq-team-b"
    response = demo.call("PUT", f"{KUEUE}/namespaces/rc-team-a/localqueues/rc-team-a-queue", queue)
    assert (response.status, kubectl_error(response)) == (
        422,
        texts["LocalQueue spec.clusterQueue changed"],
    )
    response = demo.api.handle(
        "PATCH",
        "/apis/batch/v1/namespaces/rc-team-a/jobs/rc-train-4gpu",
        {"content-type": "application/merge-patch+json", "user-agent": "kubectl-label/v1.36.2"},
        json.dumps({"metadata": {"labels": {"kueue.x-k8s.io/queue-name": "other"}}}).encode(),
    )
    assert (response.status, kubectl_error(response)) == (
        403,
        texts["queue-name label changed on an admitted (unsuspended) Job"],
    )


# ----------------------------------------------------------------------------- waitForPodsReady


def test_pods_ready_timeout_evicts_suspends_and_backs_off() -> None:
    """Not recorded (the recording ran shorter than the timeout); Kueue's own wording, as its
    workload controller writes it (finding 6 of the real-cluster run)."""
    demo = KueueDemo(pods_ready_timeout_seconds=0, requeue_backoff_seconds=3600)
    demo.team_a()
    demo.submit("rc-train-4gpu", "rc-team-a", "rc-team-a-queue")
    workload = demo.workload_of("rc-team-a", "rc-train-4gpu")
    message = f"Exceeded the PodsReady timeout rc-team-a/{workload['metadata']['name']}"
    assert conditions(workload) == {
        "QuotaReserved": ("False", "Pending", message),
        "Admitted": ("False", "NoReservation", "The workload has no reservation"),
        "PodsReady": ("False", "WaitForStart", "Not all pods are ready or succeeded"),
        "Evicted": ("True", "PodsReadyTimeout", message),
        "Requeued": ("False", "PodsReadyTimeout", message),
    }
    status = workload["status"]
    assert "admission" not in status
    assert status["schedulingStats"] == {
        "evictions": [{"count": 1, "reason": "PodsReadyTimeout", "underlyingCause": "WaitForStart"}]
    }
    assert status["requeueState"]["count"] == 1
    assert status["requeueState"]["requeueAt"] > status["conditions"][0]["lastTransitionTime"]
    job = demo.get("/apis/batch/v1/namespaces/rc-team-a/jobs/rc-train-4gpu")
    assert job["spec"]["suspend"] is True
    assert "nodeSelector" not in job["spec"]["template"]["spec"]
    assert "kueue.x-k8s.io/podset" not in job["spec"]["template"]["metadata"]["labels"]
    assert conditions(job)["Suspended"] == ("True", "JobSuspended", "Job suspended")
    assert demo.get("/api/v1/namespaces/rc-team-a/pods")["items"] == []
    events = {
        (e["involvedObject"]["kind"], e["reason"], e["message"])
        for e in demo.get("/api/v1/namespaces/rc-team-a/events")["items"]
    }
    assert ("Workload", "EvictedDueToPodsReadyTimeout", message) in events
    assert ("Job", "Stopped", message) in events
    queue = demo.get(f"{KUEUE}/clusterqueues/rc-cq-team-a")["status"]
    assert (queue["pendingWorkloads"], queue["admittedWorkloads"]) == (1, 0)
    pending = demo.get(f"{VISIBILITY}/clusterqueues/rc-cq-team-a/pendingworkloads")["items"]
    assert [p["metadata"]["name"] for p in pending] == [workload["metadata"]["name"]]


def test_after_the_backoff_the_workload_is_requeued_and_admitted_again() -> None:
    demo = KueueDemo(pods_ready_timeout_seconds=0, requeue_backoff_seconds=0)
    demo.team_a()
    demo.ok(
        "POST",
        "/apis/batch/v1/namespaces/rc-team-a/jobs",
        job_body("rc-train-4gpu", "rc-team-a-queue"),
    )
    for _ in range(10):  # created, admitted, started, evicted
        demo.settle(rounds=1)
        if "Evicted" in conditions(demo.workload_of("rc-team-a", "rc-train-4gpu")):
            break
    demo.controllers.options.pods_ready_timeout_seconds = 3600
    demo.settle()
    workload = demo.workload_of("rc-team-a", "rc-train-4gpu")
    message = f"Exceeded the PodsReady timeout rc-team-a/{workload['metadata']['name']}"
    assert conditions(workload) == {
        "QuotaReserved": ("True", "QuotaReserved", "Quota reserved in ClusterQueue rc-cq-team-a"),
        "Admitted": ("True", "Admitted", "The workload is admitted"),
        "PodsReady": ("False", "WaitForStart", "Not all pods are ready or succeeded"),
        "Evicted": ("False", "QuotaReserved", f"Previously: {message}"),
        "Requeued": ("True", "BackoffFinished", "The workload backoff was finished"),
    }
    assert workload["status"]["requeueState"] == {"count": 1}
    assert workload["status"]["schedulingStats"]["evictions"][0]["count"] == 1
    job = demo.get("/apis/batch/v1/namespaces/rc-team-a/jobs/rc-train-4gpu")
    assert job["spec"]["suspend"] is False
    assert conditions(job)["Suspended"] == ("False", "JobResumed", "Job resumed")
    assert demo.pod_of("rc-team-a", "rc-train-4gpu")["spec"]["nodeName"] == "gpu-h100-01"


def test_ready_pods_make_pods_ready_true() -> None:
    demo = KueueDemo()
    demo.controllers.options.kubelet_start_seconds = 0  # a kubelet this time
    demo.team_a()
    demo.submit("rc-train-4gpu", "rc-team-a", "rc-team-a-queue")
    workload = demo.workload_of("rc-team-a", "rc-train-4gpu")
    assert conditions(workload)["PodsReady"] == (
        "True",
        "Started",
        "All pods reached readiness and the workload is running",
    )
    assert "Evicted" not in conditions(workload)


# ----------------------------------------------------------------------------- LimitRange


def test_limit_range_default_request_is_what_kueue_charges() -> None:
    """Finding 2 of the real-cluster run: a Job with ``limits: {gpu: 20}`` in a namespace
    whose LimitRange defaults gpu to 1 is charged 1 GPU (the 20-GPU pod comes later)."""
    demo = KueueDemo()
    demo.team_a()
    demo.ok(
        "POST",
        "/api/v1/namespaces/rc-team-a/limitranges",
        {
            "metadata": {"name": "gpu-defaults"},
            "spec": {
                "limits": [
                    {
                        "type": "Container",
                        "default": {"nvidia.com/gpu": "1"},
                        "defaultRequest": {"nvidia.com/gpu": "1"},
                    }
                ]
            },
        },
    )
    body = job_body("rc-train-8gpu", "rc-team-a-queue")
    body["spec"]["template"]["spec"]["containers"][0]["resources"] = {
        "limits": {"nvidia.com/gpu": "20"}
    }
    demo.ok("POST", "/apis/batch/v1/namespaces/rc-team-a/jobs", body)
    demo.settle()
    workload = demo.workload_of("rc-team-a", "rc-train-8gpu")
    assignment = workload["status"]["admission"]["podSetAssignments"][0]
    assert assignment["resourceUsage"] == {"nvidia.com/gpu": "1"}
    pod = demo.pod_of("rc-team-a", "rc-train-8gpu")
    assert pod["spec"]["containers"][0]["resources"]["requests"] == {"nvidia.com/gpu": "20"}


def test_recorded_nodes_read_back_as_recorded(story: KueueDemo) -> None:
    for theirs in recorded("nodes")["items"]:
        ours = story.get(f"/api/v1/nodes/{theirs['metadata']['name']}")
        assert_same(
            ours, theirs, "metadata.labels", "spec", "status.capacity", "status.allocatable"
        )


# ----------------------------------------------------------------------------- queueing


def test_a_queued_workload_has_no_condition_until_its_turn() -> None:
    """Kueue's scheduler takes one new head per ClusterQueue and cycle (finding 9 of the
    real-cluster run: queued workloads without any condition)."""
    demo = KueueDemo()
    demo.team_a()
    for name in ("rc-train-8gpu", "rc-train-4gpu"):
        demo.ok(
            "POST", "/apis/batch/v1/namespaces/rc-team-a/jobs", job_body(name, "rc-team-a-queue")
        )
    demo.settle(rounds=1)
    first, second = (demo.workload_of("rc-team-a", j) for j in ("rc-train-8gpu", "rc-train-4gpu"))
    assert conditions(first)["QuotaReserved"][0] == "True"
    assert "conditions" not in second.get("status", {})
    demo.settle()
    second = demo.workload_of("rc-team-a", "rc-train-4gpu")
    assert conditions(second)["QuotaReserved"] == (
        "False",
        "Pending",
        "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu "
        "in flavor rc-h100, 4 more needed",
    )


def test_strict_fifo_head_blocks_the_workloads_behind_it() -> None:
    demo = KueueDemo()
    demo.ok(
        "POST",
        f"{KUEUE}/resourceflavors",
        {"metadata": {"name": "rc-h100"}, "spec": spec_of("resourceflavor")},
    )
    spec = spec_of("clusterqueue-empty")
    spec["queueingStrategy"] = "StrictFIFO"
    demo.ok("POST", f"{KUEUE}/clusterqueues", {"metadata": {"name": "rc-cq-team-a"}, "spec": spec})
    demo.ok(
        "POST",
        f"{KUEUE}/namespaces/rc-team-a/localqueues",
        {"metadata": {"name": "rc-team-a-queue"}, "spec": {"clusterQueue": "rc-cq-team-a"}},
    )
    demo.submit("rc-train-4gpu", "rc-team-a", "rc-team-a-queue")
    demo.submit("rc-train-8gpu", "rc-team-a", "rc-team-a-queue")
    small = job_body("rc-borrow-6gpu", "rc-team-a-queue")
    small["spec"]["template"]["spec"]["containers"][0]["resources"] = {
        "requests": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "2"},
        "limits": {"nvidia.com/gpu": "2"},
    }
    demo.ok("POST", "/apis/batch/v1/namespaces/rc-team-a/jobs", small)
    demo.settle()
    behind = demo.workload_of("rc-team-a", "rc-borrow-6gpu")
    assert "conditions" not in behind.get("status", {})  # 2 GPUs are free, but it waits
    pending = demo.get(f"{VISIBILITY}/clusterqueues/rc-cq-team-a/pendingworkloads")["items"]
    assert [
        (p["metadata"]["ownerReferences"][0]["name"], p["positionInClusterQueue"]) for p in pending
    ] == [
        ("rc-train-8gpu", 0),
        ("rc-borrow-6gpu", 1),
    ]
