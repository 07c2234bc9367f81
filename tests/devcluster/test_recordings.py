"""The demo cluster answers like the real API server recorded in tests/data/k8s-api-samples.

Each test replays recorded requests (method, path, query, headers, body) against the demo
cluster's API and compares what the portal relies on: status codes, Status bodies (exactly),
and the fields of returned objects. Setup writes that the recordings do not contain are made
through the same API.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from devcluster.cluster import Cluster, kueue_quantities_as_strings
from devcluster.controllers import Controllers, Options
from devcluster.scenario import load_seed, pod
from devcluster.server import API, Response

SAMPLES = Path(__file__).resolve().parent.parent / "data" / "k8s-api-samples"


def recording(name: str) -> dict[str, Any]:
    return json.loads((SAMPLES / f"{name}.json").read_text())


class Demo:
    def __init__(
        self, *, token: str = "", users: dict[str, tuple[str, frozenset[str]]] | None = None
    ) -> None:
        self.cluster = Cluster()
        self.controllers = Controllers(
            self.cluster,
            Options(
                retry_seconds=0,
                kubelet_start_seconds=0,
                kubelet_stop_seconds=0,
                mig_delay_seconds=0,
            ),
        )
        self.controllers.install()
        load_seed(self.cluster, self.controllers)
        self.api = API(self.cluster, self.controllers, token=token, users=users)
        for namespace in ("team-c", "team-d"):
            self.call("POST", "/api/v1/namespaces", {"metadata": {"name": namespace}})

    def call(
        self,
        method: str,
        target: str,
        body: Any = None,
        *,
        content_type: str = "application/json",
        user_agent: str = "test/1.0",
    ) -> Response:
        raw = (
            b""
            if body is None
            else (body.encode() if isinstance(body, str) else json.dumps(body).encode())
        )
        headers = {
            "content-type": content_type,
            "user-agent": user_agent,
            "accept": "application/json",
        }
        return self.api.handle(method, target, headers, raw)

    def replay(self, name: str, *, body: Any = ...) -> Response:
        request = recording(name)["request"]
        target = request["path"] + (f"?{request['query']}" if request["query"] else "")
        headers = {k.lower(): v for k, v in request["headers"].items() if k != "Authorization"}
        payload = request["body"] if body is ... else body
        raw = (
            b""
            if payload is None
            else (payload.encode() if isinstance(payload, str) else json.dumps(payload).encode())
        )
        return self.api.handle(request["method"], target, headers, raw)

    def settle(self, rounds: int = 3) -> None:
        for _ in range(rounds):
            self.controllers.dirty = True
            self.controllers.tick()


@pytest.fixture
def simulated() -> Demo:
    """The demo cluster in this process, spoken to without sockets."""
    return Demo()


def expected(name: str) -> tuple[int, Any]:
    response = recording(name)["response"]
    return response["status"], response["body"]


def assert_same_status(response: Response, name: str) -> None:
    status, body = expected(name)
    assert (response.status, response.body) == (status, body)


def names(response: Response) -> list[str]:
    return [item["metadata"]["name"] for item in response.body["items"]]


def decode(token: str) -> dict[str, Any]:
    return json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))


# ----------------------------------------------------------------------------- discovery


def test_version_and_discovery_documents(simulated: Demo) -> None:
    version = simulated.replay("a1-get-version")
    assert version.status == 200
    assert set(version.body) == set(expected("a1-get-version")[1])
    assert version.body["gitVersion"] == "v1.36.2"
    assert simulated.replay("a2-get-api").body["versions"] == ["v1"]
    assert simulated.replay("a8-get-kueue-group").body == expected("a8-get-kueue-group")[1]
    kueue = {
        r["name"] for r in simulated.replay("a7-get-kueue-v1beta2-resources").body["resources"]
    }
    assert {
        "clusterqueues",
        "clusterqueues/status",
        "localqueues",
        "resourceflavors",
        "cohorts",
        "workloads",
    } <= kueue
    core = {r["name"]: r for r in simulated.replay("a3-get-api-v1").body["resources"]}
    recorded = {r["name"]: r for r in expected("a3-get-api-v1")[1]["resources"]}
    for name in (
        "nodes",
        "nodes/status",
        "pods",
        "pods/eviction",
        "pods/status",
        "namespaces",
        "resourcequotas",
        "limitranges",
        "events",
    ):
        assert core[name]["kind"] == recorded[name]["kind"]
        assert core[name]["namespaced"] == recorded[name]["namespaced"]


# ----------------------------------------------------------------------------- LIST


def test_pagination_pages_like_the_recording(simulated: Demo) -> None:
    first = simulated.replay("b1-list-nodes-limit-2")
    recorded = expected("b1-list-nodes-limit-2")[1]
    assert names(first) == [i["metadata"]["name"] for i in recorded["items"]]
    assert first.body["metadata"]["remainingItemCount"] == 3
    assert (
        decode(first.body["metadata"]["continue"])["start"]
        == decode(recorded["metadata"]["continue"])["start"]
    )
    assert all("kind" not in item for item in first.body["items"])
    second = simulated.call(
        "GET", f"/api/v1/nodes?limit=2&continue={first.body['metadata']['continue']}"
    )
    assert names(second) == [
        i["metadata"]["name"] for i in expected("b2-list-nodes-continue-page-2")[1]["items"]
    ]
    assert second.body["metadata"]["remainingItemCount"] == 1
    assert second.body["metadata"]["resourceVersion"] == first.body["metadata"]["resourceVersion"]
    last = simulated.call(
        "GET", f"/api/v1/nodes?limit=2&continue={second.body['metadata']['continue']}"
    )
    assert names(last) == [
        i["metadata"]["name"] for i in expected("b3-list-nodes-continue-last-page")[1]["items"]
    ]
    assert set(last.body["metadata"]) == set(
        expected("b3-list-nodes-continue-last-page")[1]["metadata"]
    )


def test_expired_continue_token_is_410_with_a_fresh_token(simulated: Demo) -> None:
    response = simulated.replay("b11-list-nodes-expired-continue-410")
    status, body = expected("b11-list-nodes-expired-continue-410")
    assert response.status == status
    assert {k: v for k, v in response.body.items() if k != "metadata"} == {
        k: v for k, v in body.items() if k != "metadata"
    }
    assert decode(response.body["metadata"]["continue"]) == decode(body["metadata"]["continue"])
    rest = simulated.call(
        "GET", f"/api/v1/nodes?limit=2&continue={response.body['metadata']['continue']}"
    )
    assert names(rest) == ["gpu-a100-03", "gpu-h100-01"]


@pytest.mark.parametrize(
    "case", ["b4-list-nodes-label-selector", "b5-list-nodes-set-label-selector"]
)
def test_label_selectors_select_the_recorded_nodes(simulated: Demo, case: str) -> None:
    response = simulated.replay(case)
    assert response.status == 200
    assert names(response) == [i["metadata"]["name"] for i in expected(case)[1]["items"]]


@pytest.mark.parametrize(
    "case",
    [
        "b6-list-nodes-invalid-label-selector",
        "b10-list-pods-unsupported-field-selector-400",
        "c1-get-missing-node-404",
        "c1b-get-missing-clusterqueue-404",
        "c1c-get-missing-pod-in-namespace-404",
        "c2-create-duplicate-namespace-409",
        "c3-resourcequota-bad-name-422",
        "c4-resourcequota-invalid-quantity-400",
        "c4b-resourcequota-fractional-gpu-422",
        "d5-ssa-clusterqueue-cel-violation-422",
        "d6b-create-localqueue-unknown-field-strict-400",
        "d6c-ssa-localqueue-unknown-field",
        "d7-ssa-clusterqueue-schema-violation-422",
        "d8-strategic-merge-patch-on-crd-415",
        "h5-node-json-patch-remove-missing-422",
        "h6-node-json-patch-test-failed",
    ],
)
def test_error_status_bodies_match_exactly(simulated: Demo, case: str) -> None:
    assert_same_status(simulated.replay(case), case)


def test_field_selector_for_unscheduled_pods(simulated: Demo) -> None:
    response = simulated.replay("b9-list-pods-field-selector-unscheduled")
    assert response.status == 200
    assert names(response) == ["train-3g"]
    assert response.body["kind"] == "PodList"


# ----------------------------------------------------------------------------- writes


def test_create_namespace_adds_what_the_server_adds(simulated: Demo) -> None:
    response = simulated.call("POST", "/api/v1/namespaces", {"metadata": {"name": "team-z"}})
    body = expected("c2a-create-namespace-team-a")[1]
    assert response.status == 201
    assert response.body["spec"] == body["spec"]
    assert response.body["status"] == body["status"]
    assert response.body["metadata"]["labels"]["kubernetes.io/metadata.name"] == "team-z"


def test_quota_keys_the_server_accepts_without_enforcing(simulated: Demo) -> None:
    response = simulated.replay("c4c-resourcequota-fractional-gpu-accepted-201")
    assert response.status == 201
    assert (
        response.body["spec"]
        == expected("c4c-resourcequota-fractional-gpu-accepted-201")[1]["spec"]
    )
    simulated.settle()
    status = simulated.replay("f0-resourcequota-odd-gpu-keys-status").body["status"]
    assert status == expected("f0-resourcequota-odd-gpu-keys-status")[1]["status"]
    deleted = simulated.replay("x1-delete-resourcequota-200")
    assert deleted.status == 200
    assert deleted.body["spec"] == expected("x1-delete-resourcequota-200")[1]["spec"]


def test_server_side_apply_ownership_conflict_and_force(simulated: Demo) -> None:
    created = simulated.replay("d1-ssa-create-resourcequota-201")
    recorded = expected("d1-ssa-create-resourcequota-201")[1]
    assert created.status == 201
    assert created.body["spec"] == recorded["spec"]
    assert (
        created.body["metadata"]["managedFields"][0]["fieldsV1"]
        == recorded["metadata"]["managedFields"][0]["fieldsV1"]
    )
    again = simulated.replay("d1b-ssa-reapply-resourcequota-200")
    assert again.status == 200
    assert again.body["metadata"]["resourceVersion"] == created.body["metadata"]["resourceVersion"]
    assert_same_status(
        simulated.replay("c5-ssa-conflict-second-manager-409"), "c5-ssa-conflict-second-manager-409"
    )
    forced = simulated.replay("c6-ssa-force-second-manager-200")
    assert forced.status == 200
    owners = {e["manager"]: e["fieldsV1"] for e in forced.body["metadata"]["managedFields"]}
    recorded_owners = {
        e["manager"]: e["fieldsV1"]
        for e in expected("c6-ssa-force-second-manager-200")[1]["metadata"]["managedFields"]
        if e.get("subresource") != "status"
    }
    assert owners["ops-cli"] == recorded_owners["ops-cli"]
    assert "f:requests.nvidia.com/gpu" not in json.dumps(owners["portal"])
    assert forced.body["spec"] == expected("c6-ssa-force-second-manager-200")[1]["spec"]


def test_stale_resource_version_is_a_conflict(simulated: Demo) -> None:
    simulated.replay("d1-ssa-create-resourcequota-201")
    for case in (
        "c7-update-stale-resourceversion-409",
        "c7b-merge-patch-stale-resourceversion-409",
    ):
        body = recording(case)["request"]["body"]
        body["metadata"]["resourceVersion"] = "1"
        assert_same_status(simulated.replay(case, body=body), case)


def test_kueue_objects_apply_with_crd_defaults(simulated: Demo) -> None:
    for case in (
        "d2-ssa-resourceflavor-a100-3g",
        "d2b-ssa-resourceflavor-h100",
        "d3-ssa-clusterqueue",
    ):
        response = simulated.replay(case)
        status, body = expected(case)
        if body["kind"] == "ClusterQueue":
            # Recorded with Kueue's CRDs only; the demo cluster also runs what Kueue's webhook
            # does, which stores quantities as strings (tests/data/kueue-samples show it).
            body = kueue_quantities_as_strings(body)
        assert response.status == status
        assert response.body["spec"] == body["spec"], case
        assert response.body["metadata"]["generation"] == 1
        assert "status" not in response.body
    # The recorded re-apply sends numbers. With Kueue's CRDs only nothing changed; with real
    # Kueue, whose webhook stores strings, every such apply is a change: the generation moves
    # (seen against real Kueue 0.19.2), as it does here.
    reapplied = simulated.replay("d3b-ssa-clusterqueue-reapply")
    assert reapplied.status == 200
    assert reapplied.body["metadata"]["generation"] == 2
    # Sent as Kueue stores them (as the portal renders them), a re-apply changes nothing.
    as_stored = kueue_quantities_as_strings(
        yaml.safe_load(recording("d3b-ssa-clusterqueue-reapply")["request"]["body"])
    )
    again = simulated.replay("d3b-ssa-clusterqueue-reapply", body=yaml.safe_dump(as_stored))
    twice = simulated.replay("d3b-ssa-clusterqueue-reapply", body=yaml.safe_dump(as_stored))
    assert again.body["metadata"]["generation"] == twice.body["metadata"]["generation"] == 2
    assert again.body["metadata"]["resourceVersion"] == twice.body["metadata"]["resourceVersion"]
    local = simulated.replay("d4-ssa-localqueue")
    assert (local.status, local.body["spec"]) == (201, expected("d4-ssa-localqueue")[1]["spec"])
    merged = simulated.replay("d9-merge-patch-clusterqueue-200")
    assert merged.status == 200
    merged_spec = kueue_quantities_as_strings(expected("d9-merge-patch-clusterqueue-200")[1])
    assert merged.body["spec"] == merged_spec["spec"]
    assert merged.body["metadata"]["generation"] == 3
    managers = {(e["manager"], e["operation"]) for e in merged.body["metadata"]["managedFields"]}
    assert managers == {("portal", "Apply"), ("portal", "Update")}


def test_v1beta1_cluster_queue_reads_with_the_old_cohort_field(simulated: Demo) -> None:
    simulated.replay("d3-ssa-clusterqueue")
    old = simulated.call("GET", "/apis/kueue.x-k8s.io/v1beta1/clusterqueues/team-a-cq").body
    assert old["apiVersion"] == "kueue.x-k8s.io/v1beta1"
    assert old["spec"]["cohort"] == "research"
    assert "cohortName" not in old["spec"]


def test_unknown_field_is_pruned_with_a_warning(simulated: Demo) -> None:
    simulated.replay("d3-ssa-clusterqueue")
    response = simulated.replay("d6-create-localqueue-unknown-field-warning")
    recorded = recording("d6-create-localqueue-unknown-field-warning")["response"]
    assert response.status == 201
    assert response.body["spec"] == recorded["body"]["spec"]
    assert response.headers["Warning"] == recorded["headers"]["Warning"]


# ----------------------------------------------------------------------------- pods and the scheduler


def test_pod_create_defaults(simulated: Demo) -> None:
    request = recording("e0-create-pod-mig-3g-201")["request"]["body"]
    request["metadata"]["name"] = "train-3g-copy"
    response = simulated.call("POST", "/api/v1/namespaces/team-a/pods", request)
    recorded = expected("e0-create-pod-mig-3g-201")[1]
    assert response.status == 201
    ours, theirs = response.body["spec"], recorded["spec"]
    assert ours["containers"][0]["resources"] == theirs["containers"][0]["resources"]
    for key in (
        "tolerations",
        "priority",
        "schedulerName",
        "preemptionPolicy",
        "dnsPolicy",
        "restartPolicy",
        "terminationGracePeriodSeconds",
        "serviceAccountName",
        "enableServiceLinks",
    ):
        assert ours[key] == theirs[key], key
    assert response.body["status"] == recorded["status"]


@pytest.mark.parametrize(
    ("case", "pod_name", "spec"),
    [
        ("e1-events-failedscheduling-mig-3g", "train-3g", None),
        (
            "e2-events-failedscheduling-gpu-16",
            "train-16gpu",
            {
                "limits": {"nvidia.com/gpu": "16"},
                "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}],
            },
        ),
        (
            "e3-events-failedscheduling-untolerated-taint",
            "train-no-toleration",
            {"limits": {"nvidia.com/gpu": "1"}},
        ),
        (
            "e4-events-failedscheduling-node-selector",
            "train-h200-selector",
            {
                "limits": {"nvidia.com/gpu": "1"},
                "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}],
                "node_selector": {"nvidia.com/gpu.product": "NVIDIA-H200"},
            },
        ),
    ],
)
def test_failed_scheduling_messages_match(
    simulated: Demo, case: str, pod_name: str, spec: dict[str, Any] | None
) -> None:
    if spec is not None:
        obj = pod(pod_name, "team-a", limits=spec["limits"], tolerations=spec.get("tolerations"))
        if "node_selector" in spec:
            obj["spec"]["nodeSelector"] = spec["node_selector"]
        assert simulated.call("POST", "/api/v1/namespaces/team-a/pods", obj).status == 201
    simulated.settle()
    events = simulated.replay(case).body["items"]
    recorded = expected(case)[1]["items"]
    assert [e["message"] for e in events if e["reason"] == "FailedScheduling"][:1] == [
        recorded[0]["message"]
    ]
    event = events[0]
    for key in (
        "reason",
        "type",
        "action",
        "reportingComponent",
        "source",
        "firstTimestamp",
        "lastTimestamp",
    ):
        assert event[key] == recorded[0][key], key
    condition = next(
        c
        for c in simulated.call("GET", f"/api/v1/namespaces/team-a/pods/{pod_name}").body["status"][
            "conditions"
        ]
        if c["type"] == "PodScheduled"
    )
    assert (condition["status"], condition["reason"], condition["message"]) == (
        "False",
        "Unschedulable",
        recorded[0]["message"],
    )


def test_repeated_failures_make_a_second_event_with_a_series(simulated: Demo) -> None:
    simulated.settle(rounds=4)
    events = [
        e
        for e in simulated.call("GET", "/api/v1/namespaces/team-a/events").body["items"]
        if e["involvedObject"]["name"] == "train-3g"
    ]
    assert len(events) == 2
    assert "series" not in events[0]
    assert events[1]["series"]["count"] == 3


def test_cordoned_node_message(simulated: Demo) -> None:
    assert simulated.replay("h2-node-cordon-merge-patch").status == 200
    assert (
        simulated.call(
            "POST",
            "/api/v1/namespaces/team-a/pods",
            pod("scratch", "team-a", limits={"nvidia.com/mig-1g.10gb": "1"}),
        ).status
        == 201
    )
    simulated.settle()
    events = simulated.replay("e7-events-failedscheduling-cordoned-node").body["items"]
    assert (
        events[0]["message"]
        == expected("e7-events-failedscheduling-cordoned-node")[1]["items"][0]["message"]
    )


def test_events_k8s_io_view(simulated: Demo) -> None:
    simulated.settle(rounds=1)
    event = simulated.replay("e1b-events-k8s-io-v1-failedscheduling-mig-3g").body["items"][0]
    recorded = expected("e1b-events-k8s-io-v1-failedscheduling-mig-3g")[1]["items"][0]
    assert set(event) == set(recorded)
    assert event["note"] == recorded["note"]


def test_quota_admission_refuses_with_the_recorded_message(simulated: Demo) -> None:
    assert simulated.replay("f1-create-gpu-quota-201").status == 201
    gpu_pod = recording("f3a-create-pod-within-quota-201")["request"]["body"]
    for name in ("job-1", "job-2"):
        gpu_pod["metadata"]["name"] = name
        assert simulated.call("POST", "/api/v1/namespaces/team-c/pods", gpu_pod).status == 201
    assert_same_status(
        simulated.replay("f3-create-pod-exceeds-quota-403"), "f3-create-pod-exceeds-quota-403"
    )
    simulated.settle()
    assert (
        simulated.replay("f4-gpu-quota-status-after").body["status"]["used"]
        == expected("f4-gpu-quota-status-after")[1]["status"]["used"]
    )


def test_limits_only_quota_is_not_enforced(simulated: Demo) -> None:
    simulated.call(
        "POST",
        "/api/v1/namespaces/team-d/resourcequotas",
        {"metadata": {"name": "limits-only"}, "spec": {"hard": {"limits.nvidia.com/gpu": "1"}}},
    )
    assert simulated.replay("f5-limits-only-quota-not-enforced-201").status == 201
    simulated.settle()
    assert (
        simulated.replay("f6-limits-only-quota-status").body["status"]
        == expected("f6-limits-only-quota-status")[1]["status"]
    )


def test_eviction_and_disruption_budgets(simulated: Demo) -> None:
    simulated.controllers.options.kubelet_stop_seconds = 60  # the evicted pod is still terminating
    for index in range(3):
        obj = pod(
            f"serve-{index}",
            "team-d",
            limits={},
            labels={"app": "serving"},
            node="gpu-h100-02",
            tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists"}],
        )
        assert simulated.call("POST", "/api/v1/namespaces/team-d/pods", obj).status == 201
    simulated.settle()
    assert_same_status(simulated.replay("g1-evict-pod-success-201"), "g1-evict-pod-success-201")
    evicted = simulated.replay("g1b-pod-after-eviction").body
    recorded = expected("g1b-pod-after-eviction")[1]
    assert (
        evicted["metadata"]["deletionGracePeriodSeconds"]
        == recorded["metadata"]["deletionGracePeriodSeconds"]
    )
    target = next(c for c in evicted["status"]["conditions"] if c["type"] == "DisruptionTarget")
    recorded_target = next(
        c for c in recorded["status"]["conditions"] if c["type"] == "DisruptionTarget"
    )
    assert (target["reason"], target["message"]) == (
        recorded_target["reason"],
        recorded_target["message"],
    )
    assert simulated.replay("g2a-ssa-create-pdb-201").status == 201
    assert_same_status(
        simulated.replay("g2-evict-pod-blocked-by-pdb-429"), "g2-evict-pod-blocked-by-pdb-429"
    )
    simulated.settle()
    status = simulated.replay("g2b-pdb-status").body["status"]
    for key in ("disruptionsAllowed", "currentHealthy", "desiredHealthy", "expectedPods"):
        assert status[key] == expected("g2b-pdb-status")[1]["status"][key], key


def test_eviction_of_a_pending_pod_ignores_the_budget(simulated: Demo) -> None:
    obj = pod("batch-0", "team-d", limits={}, labels={"app": "batch"})
    obj["spec"]["schedulerName"] = "not-scheduled-here"
    simulated.call("POST", "/api/v1/namespaces/team-d/pods", obj)
    simulated.call(
        "PATCH",
        "/apis/policy/v1/namespaces/team-d/poddisruptionbudgets/batch-pdb?fieldManager=portal",
        "apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata:\n  name: batch-pdb\n"
        "spec:\n  minAvailable: 1\n  selector:\n    matchLabels:\n      app: batch\n",
        content_type="application/apply-patch+yaml",
    )
    assert_same_status(
        simulated.replay("g3-evict-pending-pod-ignores-pdb-201"),
        "g3-evict-pending-pod-ignores-pdb-201",
    )


def test_delete_pod_with_zero_grace(simulated: Demo) -> None:
    simulated.call(
        "POST",
        "/api/v1/namespaces/team-d/pods",
        pod("probe-limits-only", "team-d", limits={"nvidia.com/gpu": "1"}),
    )
    response = simulated.replay("x2-delete-pod-grace-0")
    assert response.status == 200
    assert response.body["metadata"]["deletionGracePeriodSeconds"] == 0
    assert simulated.call("GET", "/api/v1/namespaces/team-d/pods/probe-limits-only").status == 404


# ----------------------------------------------------------------------------- nodes


def test_node_label_patches(simulated: Demo) -> None:
    patched = simulated.replay("h1-node-label-merge-patch")
    assert patched.status == 200
    labels = patched.body["metadata"]["labels"]
    assert labels["nvidia.com/mig.config"] == "all-3g.40gb"
    assert "nvidia.com/mig.config.state" not in labels
    invalid = simulated.replay("h3-node-patch-invalid-label-422")
    status, body = expected("h3-node-patch-invalid-label-422")
    assert (invalid.status, invalid.body["message"], invalid.body["reason"]) == (
        status,
        body["message"],
        body["reason"],
    )
    json_patched = simulated.replay("h4-node-label-json-patch")
    assert json_patched.status == 200
    assert json_patched.body["metadata"]["labels"]["nvidia.com/mig.config.state"] == "pending"


def test_seed_nodes_carry_the_recorded_labels_and_resources(simulated: Demo) -> None:
    ours = simulated.replay("x3-get-node").body
    theirs = expected("x3-get-node")[1]
    skip = (".engines.", ".multiprocessors")
    assert {
        k: v
        for k, v in ours["metadata"]["labels"].items()
        if not any(s in k for s in skip) and not k.startswith("quartermaster.io/")
    } == {k: v for k, v in theirs["metadata"]["labels"].items() if not any(s in k for s in skip)}
    assert ours["status"]["capacity"] == theirs["status"]["capacity"]
    assert ours["status"]["allocatable"] == theirs["status"]["allocatable"]
    assert ours["spec"] == theirs["spec"]


def test_node_status_patch_canonicalises_quantities(simulated: Demo) -> None:
    response = simulated.replay("node-status-patch")
    assert response.status == 200
    assert (
        response.body["status"]["capacity"]["memory"]
        == expected("node-status-patch")[1]["status"]["capacity"]["memory"]
    )


def test_wrong_token_is_401() -> None:
    simulated = Demo(token="secret")
    assert_same_status(simulated.replay("i1-unauthorized-401"), "i1-unauthorized-401")


@pytest.mark.parametrize(
    "case",
    [
        "i2-rbac-forbidden-list-nodes-403",
        "i3-rbac-forbidden-get-clusterqueue-403",
        "i4-rbac-forbidden-create-namespaced-403",
    ],
)
def test_rbac_refusals_match(case: str) -> None:
    simulated = Demo(users={"alice-token": ("alice", frozenset())})
    request = recording(case)["request"]
    target = request["path"] + (f"?{request['query']}" if request["query"] else "")
    body = request["body"]
    raw = b"" if body is None else json.dumps(body).encode()
    response = simulated.api.handle(
        request["method"],
        target,
        {"authorization": "Bearer alice-token", "content-type": "application/json"},
        raw,
    )
    assert_same_status(response, case)
    assert response.headers["X-Content-Type-Options"] == "nosniff"


def _pod_status(status: dict[str, Any]) -> dict[str, Any]:
    """A pod's status without its timestamps."""
    times = ("lastTransitionTime", "lastProbeTime")
    return {
        **status,
        "conditions": [
            {k: v for k, v in c.items() if k not in times} for c in status.get("conditions", [])
        ],
    }


@pytest.mark.parametrize(
    ("case", "events"),
    [
        ("e1c-pod-unschedulable-mig-3g", "e1-events-failedscheduling-mig-3g"),
        ("e2c-pod-unschedulable-gpu-16", "e2-events-failedscheduling-gpu-16"),
        ("e3c-pod-unschedulable-untolerated-taint", "e3-events-failedscheduling-untolerated-taint"),
        ("e4c-pod-unschedulable-node-selector", "e4-events-failedscheduling-node-selector"),
    ],
)
def test_unschedulable_pod_status(simulated: Demo, case: str, events: str) -> None:
    pod_name = recording(case)["request"]["path"].rsplit("/", 1)[1]
    if pod_name != "train-3g":
        spec = {
            "train-16gpu": ({"nvidia.com/gpu": "16"}, None),
            "train-no-toleration": ({"nvidia.com/gpu": "1"}, None),
            "train-h200-selector": (
                {"nvidia.com/gpu": "1"},
                {"nvidia.com/gpu.product": "NVIDIA-H200"},
            ),
        }[pod_name]
        tolerations = (
            None
            if pod_name == "train-no-toleration"
            else [{"key": "nvidia.com/gpu", "operator": "Exists"}]
        )
        obj = pod(pod_name, "team-a", limits=spec[0], tolerations=tolerations)
        if spec[1]:
            obj["spec"]["nodeSelector"] = spec[1]
        assert simulated.call("POST", "/api/v1/namespaces/team-a/pods", obj).status == 201
    simulated.settle()
    ours = simulated.replay(case).body["status"]
    assert _pod_status(ours) == _pod_status(expected(case)[1]["status"])
    assert expected(events)[1]["items"][0]["message"] == ours["conditions"][-1]["message"]


def test_pod_condition_after_the_cordon(simulated: Demo) -> None:
    simulated.settle()
    assert simulated.replay("h2-node-cordon-merge-patch").status == 200
    simulated.settle()
    ours = simulated.replay("e8c-pod-unschedulable-mig-3g-after-cordon").body["status"]
    theirs = expected("e8c-pod-unschedulable-mig-3g-after-cordon")[1]["status"]
    assert _pod_status(ours)["conditions"] == _pod_status(theirs)["conditions"]


def test_quota_status_after_the_first_sync(simulated: Demo) -> None:
    assert simulated.replay("f1-create-gpu-quota-201").status == 201
    simulated.settle()
    ours = simulated.replay("f2-gpu-quota-status-before").body["status"]
    assert ours == expected("f2-gpu-quota-status-before")[1]["status"]
