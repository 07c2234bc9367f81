"""Table output (``Accept: application/json;as=Table;g=meta.k8s.io;v=v1``): the columns and
cells of kube-apiserver's printers and of the CRDs' additionalPrinterColumns."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from devcluster import table
from devcluster.resources import find
from tests.devcluster.test_recordings import Demo, expected, recording

KUBECTL = (
    "application/json;as=Table;v=v1;g=meta.k8s.io,"
    "application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"
)
CQ = {
    "apiVersion": "kueue.x-k8s.io/v1beta2",
    "kind": "ClusterQueue",
    "metadata": {"name": "cq-demo"},
    "spec": {
        "cohortName": "research",
        "namespaceSelector": {},
        "resourceGroups": [
            {
                "coveredResources": ["nvidia.com/mig-3g.40gb"],
                "flavors": [
                    {
                        "name": "a100-3g",
                        "resources": [{"name": "nvidia.com/mig-3g.40gb", "nominalQuota": 4}],
                    }
                ],
            }
        ],
    },
}


@pytest.fixture
def simulated() -> Demo:
    return Demo()


def get_table(simulated: Demo, target: str, accept: str = KUBECTL) -> Any:
    headers = {"accept": accept, "user-agent": "kubectl/v1.32.4"}
    response = simulated.api.handle("GET", target, headers, b"")
    assert response.status == 200, response.body
    return response.body


def column_names(body: Any, wide: bool = True) -> list[str]:
    return [c["name"] for c in body["columnDefinitions"] if wide or c["priority"] == 0]


def test_nodes_as_table_are_the_recorded_columns_and_cells(simulated: Demo) -> None:
    request = recording("b7-list-nodes-as-table")["request"]
    body = get_table(
        simulated, f"{request['path']}?{request['query']}", request["headers"]["Accept"]
    )
    recorded = expected("b7-list-nodes-as-table")[1]
    assert body["kind"] == "Table"
    assert body["apiVersion"] == "meta.k8s.io/v1"
    assert body["columnDefinitions"] == recorded["columnDefinitions"]
    age = column_names(body).index("Age")
    cells = [r["cells"][:age] + r["cells"][age + 1 :] for r in body["rows"]]
    assert cells == [r["cells"][:age] + r["cells"][age + 1 :] for r in recorded["rows"]]
    assert all(r["cells"][age].endswith("s") for r in body["rows"])
    first = body["rows"][0]["object"]
    assert first["kind"] == "PartialObjectMetadata"
    assert first["apiVersion"] == "meta.k8s.io/v1"
    assert set(first["metadata"]) == set(recorded["rows"][0]["object"]["metadata"])
    assert set(body["metadata"]) == {"resourceVersion"}


def test_a_cordoned_node_reads_scheduling_disabled(simulated: Demo) -> None:
    patch = simulated.call(
        "PATCH",
        "/api/v1/nodes/gpu-a100-03",
        {"spec": {"unschedulable": True}},
        content_type="application/merge-patch+json",
    )
    assert patch.status == 200
    body = get_table(simulated, "/api/v1/nodes/gpu-a100-03")
    assert [r["cells"][:3] for r in body["rows"]] == [
        ["gpu-a100-03", "Ready,SchedulingDisabled", "<none>"]
    ]
    assert body["metadata"] == {"resourceVersion": patch.body["metadata"]["resourceVersion"]}


def test_pods_print_ready_status_restarts_age_and_the_wide_columns(simulated: Demo) -> None:
    body = get_table(simulated, "/api/v1/namespaces/team-a/pods")
    assert column_names(body, wide=False) == ["Name", "Ready", "Status", "Restarts", "Age"]
    assert column_names(body)[5:] == ["IP", "Node", "Nominated Node", "Readiness Gates"]
    (row,) = [r for r in body["rows"] if r["cells"][0] == "train-3g"]
    cells = row["cells"]
    assert cells[:4] + cells[5:] == [
        "train-3g",
        "0/1",
        "Pending",
        "0",
        "<none>",
        "<none>",
        "<none>",
        "<none>",
    ]
    assert "conditions" not in row


def test_a_finished_pod_carries_the_completed_row_condition() -> None:
    pod = {
        "metadata": {"name": "done", "creationTimestamp": "2026-11-30T03:00:00Z"},
        "spec": {"containers": [{"name": "c"}]},
        "status": {
            "phase": "Succeeded",
            "containerStatuses": [
                {
                    "restartCount": 2,
                    "lastState": {"terminated": {"finishedAt": "2026-11-30T03:55:00Z"}},
                    "state": {"terminated": {"reason": "Completed", "exitCode": 0}},
                }
            ],
        },
    }
    resource = find("", "v1", "pods")
    now = dt.datetime(2026, 11, 30, 4, 0, tzinfo=dt.UTC)
    body = table.table(resource, "v1", [pod], {"resourceVersion": "1"}, now=now)
    assert body["rows"][0]["cells"][:5] == ["done", "0/1", "Completed", "2 (5m ago)", "60m"]
    assert body["rows"][0]["conditions"] == [
        {
            "type": "Completed",
            "status": "True",
            "reason": "Succeeded",
            "message": "The pod has completed successfully.",
        }
    ]
    assert list(body["rows"][0]) == ["cells", "conditions", "object"]


def test_events_print_last_seen_type_reason_object_message(simulated: Demo) -> None:
    simulated.settle()
    body = get_table(simulated, "/api/v1/namespaces/team-a/events")
    assert column_names(body, wide=False) == ["Last Seen", "Type", "Reason", "Object", "Message"]
    assert column_names(body) == [
        "Last Seen",
        "Type",
        "Reason",
        "Object",
        "Subobject",
        "Source",
        "Message",
        "First Seen",
        "Count",
        "Name",
    ]
    row = next(r for r in body["rows"] if r["cells"][2] == "FailedScheduling")
    assert row["cells"][1:4] == ["Warning", "FailedScheduling", "pod/train-3g"]
    assert row["cells"][6].startswith("0/5 nodes are available: ")
    assert isinstance(row["cells"][8], int)


def test_namespaces_print_their_phase(simulated: Demo) -> None:
    body = get_table(simulated, "/api/v1/namespaces")
    assert column_names(body) == ["Name", "Status", "Age"]
    assert ["team-a", "Active"] in [r["cells"][:2] for r in body["rows"]]


def test_kueue_kinds_print_their_crds_printer_columns(simulated: Demo) -> None:
    created = simulated.call("POST", "/apis/kueue.x-k8s.io/v1beta2/clusterqueues", CQ)
    assert created.status == 201
    simulated.settle()
    body = get_table(simulated, "/apis/kueue.x-k8s.io/v1beta2/clusterqueues")
    assert [(c["name"], c["type"], c["priority"]) for c in body["columnDefinitions"]] == [
        ("Name", "string", 0),
        ("Cohort", "string", 0),
        ("Strategy", "string", 1),
        ("Pending Workloads", "integer", 0),
        ("Admitted Workloads", "integer", 1),
    ]
    assert body["columnDefinitions"][1]["description"] == "Cohort that this ClusterQueue belongs to"
    assert [r["cells"] for r in body["rows"]] == [["cq-demo", "research", "BestEffortFIFO", 0, 0]]
    old = get_table(simulated, "/apis/kueue.x-k8s.io/v1beta1/clusterqueues")
    assert [r["cells"][:2] for r in old["rows"]] == [["cq-demo", "research"]]
    flavors = get_table(simulated, "/apis/kueue.x-k8s.io/v1beta2/resourceflavors")
    assert [(c["name"], c["type"]) for c in flavors["columnDefinitions"]] == [
        ("Name", "string"),
        ("Age", "date"),
    ]


def test_other_kinds_print_name_and_age(simulated: Demo) -> None:
    body = get_table(simulated, "/apis/scheduling.k8s.io/v1/priorityclasses")
    assert column_names(body) == ["Name", "Age"]


def test_include_object_chooses_what_each_row_carries(simulated: Demo) -> None:
    target = "/api/v1/nodes?labelSelector=kubernetes.io/hostname%3Dgpu-h100-01"
    none = get_table(simulated, f"{target}&includeObject=None")
    assert none["rows"][0]["object"] is None
    whole = get_table(simulated, f"{target}&includeObject=Object")
    assert whole["rows"][0]["object"]["kind"] == "Node"
    assert whole["rows"][0]["object"]["status"]["nodeInfo"]["kubeletVersion"] == "v1.36.2"
    headers = {"accept": KUBECTL}
    bad = simulated.api.handle("GET", f"{target}&includeObject=All", headers, b"")
    assert (bad.status, bad.body["message"]) == (400, 'unrecognized includeObject value: "All"')


def test_only_a_table_accept_header_asks_for_a_table() -> None:
    assert table.wanted(KUBECTL)
    assert table.wanted("application/json;as=Table;g=meta.k8s.io;v=v1")
    assert not table.wanted("application/json")
    assert not table.wanted("application/json, application/json;as=Table;g=meta.k8s.io;v=v1")
    assert not table.wanted("application/json;as=Table;g=example.org;v=v1")


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [
        (-5, "<invalid>"),
        (39, "39s"),
        (119, "119s"),
        (310, "5m10s"),
        (600, "10m"),
        (3 * 3600 + 5 * 60, "3h5m"),
        (9 * 3600, "9h"),
        (50 * 3600, "2d2h"),
        (30 * 86400, "30d"),
        (800 * 86400, "2y70d"),
    ],
)
def test_ages_read_as_kubernetes_writes_durations(seconds: int, shown: str) -> None:
    assert table.human_duration(seconds) == shown


def test_printer_column_paths_follow_fields_indexes_and_filters() -> None:
    workload = {
        "spec": {"queueName": "lq"},
        "status": {
            "conditions": [
                {"type": "QuotaReserved", "status": "True"},
                {"type": "Admitted", "status": "False"},
            ]
        },
    }
    assert table.jsonpath(workload, ".spec.queueName") == "lq"
    assert table.jsonpath(workload, ".status.conditions[?(@.type=='Admitted')].status") == "False"
    assert table.jsonpath(workload, '.status.conditions[?(@.type=="Finished")].status') is None
    assert table.jsonpath(workload, ".status.conditions[0].type") == "QuotaReserved"
    assert table.jsonpath(workload, ".status.admission.clusterQueue") is None
