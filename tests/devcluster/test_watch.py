"""Watch (``?watch=true``): the recorded event stream, 410 for an expired version, selectors,
initial events and bookmarks, Table events, and the option checks of the API server."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from devcluster.server import Response
from devcluster.watch import Log
from tests.devcluster.test_recordings import Demo, expected, recording

PODS = "/api/v1/namespaces/team-a/pods"
SCRATCH = {
    "metadata": {"name": "scratch", "namespace": "team-a"},
    "spec": {
        "containers": [
            {"name": "c", "image": "busybox", "resources": {"limits": {"nvidia.com/gpu": "16"}}}
        ]
    },
}


@pytest.fixture
def simulated() -> Demo:
    return Demo()


def events(response: Response) -> list[dict[str, Any]]:
    assert response.status == 200, response.body
    assert response.stream is not None
    return [orjson.loads(line) for line in response.stream(lambda: True)]


def summary(stream: list[dict[str, Any]]) -> list[tuple[str, str | None]]:
    return [(e["type"], e["object"]["metadata"].get("name")) for e in stream]


def list_rv(simulated: Demo, target: str = PODS) -> str:
    return str(simulated.call("GET", target).body["metadata"]["resourceVersion"])


def test_a_watch_from_a_lists_version_streams_what_the_recording_shows(simulated: Demo) -> None:
    simulated.settle()  # the seed's pending pod has been looked at
    start = list_rv(simulated)
    patch = {"metadata": {"labels": {"portal.example.com/priority": "high"}}}
    merge = "application/merge-patch+json"
    assert simulated.call("PATCH", f"{PODS}/train-3g", patch, content_type=merge).status == 200
    assert simulated.call("POST", PODS, SCRATCH).status == 201
    simulated.settle(1)
    assert simulated.call("DELETE", f"{PODS}/scratch?gracePeriodSeconds=0").status == 200
    query = recording("w1-watch-pods-team-a")["request"]["query"]
    query = query.replace("resourceVersion=474", f"resourceVersion={start}")
    stream = events(
        simulated.call("GET", f"{PODS}?{query.replace('timeoutSeconds=4', 'timeoutSeconds=1')}")
    )
    recorded = expected("w1-watch-pods-team-a")[1]
    assert summary(stream) == summary(recorded)
    scheduled = stream[2]["object"]["status"]["conditions"]
    assert [(c["type"], c["status"], c["reason"]) for c in scheduled] == [
        ("PodScheduled", "False", "Unschedulable")
    ]
    terminating, deleted = stream[3]["object"]["metadata"], stream[4]["object"]["metadata"]
    assert (terminating["generation"], terminating["deletionGracePeriodSeconds"]) == (2, 0)
    assert int(deleted["resourceVersion"]) == int(terminating["resourceVersion"]) + 1
    assert stream[0]["object"]["kind"] == "Pod"
    assert stream[-1] == {
        **recorded[-1],
        "object": {
            **recorded[-1]["object"],
            "metadata": {"resourceVersion": deleted["resourceVersion"]},
        },
    }
    rvs = [int(e["object"]["metadata"]["resourceVersion"]) for e in stream]
    assert rvs == sorted(rvs) and rvs[0] > int(start)


def test_an_expired_version_is_one_error_event_in_a_200_stream(simulated: Demo) -> None:
    response = simulated.replay("w2-watch-too-old-resourceversion")
    stream = events(response)
    (recorded,) = expected("w2-watch-too-old-resourceversion")[1]
    floor = simulated.api.log.floor
    assert stream == [
        {
            **recorded,
            "object": {**recorded["object"], "message": f"too old resource version: 1 ({floor})"},
        }
    ]
    assert response.headers["Content-Type"] == "application/json"


def test_the_log_keeps_a_window_and_older_versions_expire(simulated: Demo) -> None:
    log = Log(simulated.cluster, size=2)
    simulated.api.log = log
    start = list_rv(simulated)
    for value in ("a", "b", "c"):
        patch = {"metadata": {"labels": {"step": value}}}
        simulated.call(
            "PATCH", f"{PODS}/train-3g", patch, content_type="application/merge-patch+json"
        )
    (error,) = events(
        simulated.call("GET", f"{PODS}?watch=true&resourceVersion={start}&timeoutSeconds=1")
    )
    assert error["object"]["message"] == f"too old resource version: {start} ({int(start) + 1})"
    recent = events(
        simulated.call("GET", f"{PODS}?watch=1&resourceVersion={int(start) + 1}&timeoutSeconds=1")
    )
    assert [e["object"]["metadata"]["labels"]["step"] for e in recent] == ["b", "c"]


def test_objects_entering_and_leaving_the_selection_are_added_and_deleted(simulated: Demo) -> None:
    start = list_rv(simulated)
    merge = "application/merge-patch+json"
    for labels in ({"watched": "yes"}, {"other": "x"}, {"watched": None}):
        simulated.call(
            "PATCH", f"{PODS}/train-3g", {"metadata": {"labels": labels}}, content_type=merge
        )
    target = (
        f"{PODS}?watch=true&resourceVersion={start}&labelSelector=watched%3Dyes&timeoutSeconds=1"
    )
    stream = events(simulated.call("GET", target))
    assert [e["type"] for e in stream] == ["ADDED", "MODIFIED", "DELETED"]
    fields = f"/api/v1/pods?watch=true&resourceVersion={start}&fieldSelector=metadata.namespace%3Dteam-b&timeoutSeconds=1"
    assert events(simulated.call("GET", fields)) == []


def test_without_a_version_the_stream_opens_with_the_current_objects(simulated: Demo) -> None:
    stream = events(simulated.call("GET", f"{PODS}?watch=true&timeoutSeconds=1"))
    assert summary(stream) == [("ADDED", "train-3g")]


def test_initial_events_end_with_the_annotated_bookmark(simulated: Demo) -> None:
    target = (
        f"{PODS}?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan"
        "&allowWatchBookmarks=true&timeoutSeconds=1"
    )
    stream = events(simulated.call("GET", target))
    assert [e["type"] for e in stream] == ["ADDED", "BOOKMARK", "BOOKMARK"]
    assert stream[1]["object"]["metadata"] == {
        "resourceVersion": str(simulated.cluster.rv),
        "annotations": {"k8s.io/initial-events-end": "true"},
    }


def test_watch_options_are_checked_as_the_api_server_checks_them(simulated: Demo) -> None:
    response = simulated.call("GET", f"{PODS}?watch=true&resourceVersionMatch=NotOlderThan")
    assert (response.status, response.body["message"]) == (
        422,
        'ListOptions.meta.k8s.io "" is invalid: resourceVersionMatch: Forbidden: '
        "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
    )
    bad = simulated.call("GET", f"{PODS}?watch=true&labelSelector=a%3D%3D%3Db")
    assert bad.status == 400


def test_a_table_watch_sends_the_column_definitions_once(simulated: Demo) -> None:
    start = list_rv(simulated)
    merge = "application/merge-patch+json"
    for value in ("a", "b"):
        simulated.call(
            "PATCH", f"{PODS}/train-3g", {"metadata": {"labels": {"v": value}}}, content_type=merge
        )
    headers = {"accept": "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"}
    target = f"{PODS}?watch=true&resourceVersion={start}&timeoutSeconds=1"
    stream = events(simulated.api.handle("GET", target, headers, b""))
    tables = [e["object"] for e in stream]
    assert [t["kind"] for t in tables] == ["Table", "Table"]
    assert [c["name"] for c in tables[0]["columnDefinitions"]][:3] == ["Name", "Ready", "Status"]
    assert tables[1]["columnDefinitions"] is None
    assert tables[1]["rows"][0]["cells"][:3] == ["train-3g", "0/1", "Pending"]
    assert tables[1]["rows"][0]["object"]["metadata"]["labels"]["v"] == "b"


def test_watching_needs_the_watch_verb() -> None:
    demo = Demo(users={"t0ken": ("alice", frozenset({"get", "list"}))})
    headers = {"authorization": "Bearer t0ken", "accept": "application/json"}
    listed = demo.api.handle("GET", PODS, headers, b"")
    assert listed.status == 200
    refused = demo.api.handle("GET", f"{PODS}?watch=true", headers, b"")
    assert (refused.status, refused.body["message"]) == (
        403,
        'pods is forbidden: User "alice" cannot watch resource "pods" in API group "" in the '
        'namespace "team-a"',
    )
