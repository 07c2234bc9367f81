"""The Workloads list and a workload's page, and their API: one FilterSet for both, a lead
sees their teams' workloads only (another team's is a 404 on the page and the API alike),
a workload's story told from Kueue's conditions, and query counts that do not grow with
the number of workloads."""

from __future__ import annotations

import datetime as dt
import json
import re
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from cluster.decode import workload_event_values, workload_values
from cluster.models import Cluster, ObservedPod, ObservedWorkload
from cluster.scope import settings_cluster_id
from loop.write import write_events
from overview.workloads import story
from tests.factories import ObservedNodeFactory
from tests.unit.loop.test_workload_events import SAMPLES
from usage.models import WorkloadRecord

pytestmark = pytest.mark.django_db

GPU = "nvidia.com/gpu"


def as_user(username: str) -> Client:
    client = Client()
    client.force_login(User.objects.get(username=username))
    return client


def workload(namespace: str, name: str, **values: Any) -> ObservedWorkload:
    now = timezone.now()
    return ObservedWorkload.objects.create(
        namespace=namespace,
        name=name,
        queue_name=values.pop("queue_name", f"{namespace}-train"),
        requests=values.pop("requests", {GPU: 2}),
        created_at=values.pop("created_at", now - dt.timedelta(hours=1)),
        last_changed=now,
        **values,
    )


def cluster_name() -> str:
    return str(Cluster.objects.get(pk=settings_cluster_id()).name)


def listed(page: str) -> list[str]:
    return re.findall(
        r'id="workload-\d+-row">\s*<td class="head"><a href="[^"]+"><code>([^<]+)<', page
    )


def some(demo: None) -> dict[str, ObservedWorkload]:
    now = timezone.now()
    return {
        "waiting": workload("team-a", "wl-waiting", position=1, reason="Pending", priority=5),
        "running": workload(
            "team-a",
            "wl-running",
            admitted=True,
            cluster_queue="cq-train",
            flavors={GPU: "h100-80gb"},
            admitted_at=now - dt.timedelta(minutes=30),
        ),
        "evicted": workload(
            "team-a", "wl-evicted", evictions=1, evicted_reason="Preempted", evicted_at=now
        ),
        "done": workload("team-a", "wl-done", finished=True, finished_at=now),
        "other": workload("team-b", "wl-of-team-b", position=0, reason="Pending"),
    }


def test_the_list_filters_as_the_api_does_and_a_lead_sees_their_teams_only(demo: None) -> None:
    some(demo)
    lead, admin = as_user("lead-a"), as_user("admin")
    page = lead.get("/workloads/?q=wl-").content.decode()
    assert sorted(listed(page)) == [
        "team-a/wl-done",
        "team-a/wl-evicted",
        "team-a/wl-running",
        "team-a/wl-waiting",
    ]
    assert "wl-of-team-b" not in page and "team-b" not in page.split('id="workload-list"')[1]
    assert sorted(listed(admin.get("/workloads/?q=wl-").content.decode()))[-1] == (
        "team-b/wl-of-team-b"
    )
    for state, name in [
        ("waiting", "team-a/wl-waiting"),
        ("admitted", "team-a/wl-running"),
        ("evicted", "team-a/wl-evicted"),
        ("finished", "team-a/wl-done"),
    ]:
        assert listed(lead.get(f"/workloads/?q=wl-&state={state}").content.decode()) == [name]
        api = lead.get(f"/api/v1/workloads/?q=wl-&state={state}").json()
        assert [f"{r['namespace']}/{r['name']}" for r in api["results"]] == [name]
        assert api["results"][0]["state"] == state
    assert listed(lead.get("/workloads/?q=wl-&priority=5").content.decode()) == [
        "team-a/wl-waiting"
    ]
    # In cq-train: holding its quota, or in team-a-train, the LocalQueue pointing at it.
    in_queue = lead.get("/api/v1/workloads/?cluster_queue=cq-train&q=wl-").json()["results"]
    assert len(in_queue) == 4 and {r["cluster_queue"] for r in in_queue} == {"cq-train"}
    running = lead.get("/api/v1/workloads/?cluster_queue=cq-train&q=wl-&state=admitted")
    assert [(r["name"], r["flavors"]) for r in running.json()["results"]] == [
        ("wl-running", {GPU: "h100-80gb"})
    ]
    assert lead.get("/api/v1/workloads/?cluster_queue=cq-dev&q=wl-").json()["count"] == 0
    # Another team's slug, or a value a filter cannot take: a field error, never ignored.
    refused = lead.get("/workloads/?team=team-b")
    assert refused.status_code == 400 and "No such team among yours" in refused.content.decode()
    api = lead.get("/api/v1/workloads/?team=team-b")
    assert api.status_code == 400 and "team" in api.json()["errors"]
    assert lead.get("/api/v1/workloads/?state=sleeping").status_code == 400
    assert lead.get("/api/v1/workloads/?priority=1.5").status_code == 400
    by_team = admin.get("/api/v1/workloads/?team=team-b&q=wl-").json()["results"]
    assert [(r["name"], r["team"]) for r in by_team] == [("wl-of-team-b", "team-b")]


def test_another_teams_workload_is_a_404_on_the_page_and_the_api(demo: None) -> None:
    some(demo)
    on = cluster_name()
    lead, approver = as_user("lead-a"), as_user("approver")
    for path in (
        f"/workloads/{on}/team-b/wl-of-team-b/",
        "/api/v1/workloads/team-b/wl-of-team-b/",
        f"/api/v1/clusters/{on}/workloads/team-b/wl-of-team-b/",
        "/workloads/no-such-cluster/team-a/wl-waiting/",
        f"/workloads/{on}/team-a/no-such-workload/",
    ):
        response = lead.get(path)
        assert response.status_code == 404, path
        assert b"wl-of-team-b" not in response.content
    assert approver.get(f"/workloads/{on}/team-b/wl-of-team-b/").status_code == 200
    assert lead.get("/api/v1/workloads/team-a/wl-waiting/").json()["state"] == "waiting"


def test_a_workloads_page_tells_its_story_pods_gpu_hours_and_yaml(demo: None) -> None:
    now = timezone.now()
    admitted = now - dt.timedelta(hours=2)
    row = workload(
        "team-a",
        "wl-story",
        created_at=now - dt.timedelta(hours=3),
        admitted=True,
        cluster_queue="cq-train",
        flavors={GPU: "h100-80gb"},
        admitted_at=admitted,
        evictions=1,
        evicted_reason="PodsReadyTimeout",
        conditions=[
            {"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved",
             "message": "Quota reserved in ClusterQueue cq-train",
             "lastTransitionTime": admitted.isoformat()},
            {"type": "Admitted", "status": "True", "reason": "Admitted",
             "lastTransitionTime": admitted.isoformat()},
            {"type": "Evicted", "status": "False", "reason": "PodsReadyTimeout",
             "message": "Previously: Exceeded the PodsReady timeout",
             "lastTransitionTime": admitted.isoformat()},
            {"type": "Requeued", "status": "True", "reason": "BackoffFinished",
             "lastTransitionTime": (admitted - dt.timedelta(minutes=5)).isoformat()},
        ],
    )  # fmt: skip
    ObservedPod.objects.create(
        namespace="team-a",
        name="wl-story-0",
        node_name="gpu-node-1",
        phase="Running",
        gpu_requests={"nvidia.com/mig-3g.40gb": 1},
        workload_name="wl-story",
        last_changed=now,
    )
    WorkloadRecord.objects.create(
        cluster_id=row.cluster_id,
        namespace="team-a",
        name="wl-story",
        created_at=row.created_at,
        admitted_at=admitted,
        finished_at=admitted + dt.timedelta(hours=1, minutes=30),
        gpu_share=2,
    )
    page = as_user("member-a").get(f"/workloads/{cluster_name()}/team-a/wl-story/")
    text = page.content.decode()
    assert page.status_code == 200
    assert "Admitted with h100-80gb for nvidia.com/gpu" in text
    assert "Back in line: its back-off ended" in text
    assert "Admitted again after an eviction: its pods were not ready in time" in text
    assert "the last time because its pods were not ready in time" in text
    assert "GPU-hours used: <strong>3</strong>" in text  # 2 GPUs for 1.5 hours
    assert 'href="/fleet/nodes/gpu-node-1/?cluster=' in text
    assert "1 MIG 3g.40gb slice" in text
    assert "queueName: team-a-train" in text and "type: Evicted" in text
    assert 'hx-trigger="every 15s"' in text  # live while open
    titles = [m.title for m in story(row)]
    assert titles[0] == "Created" and titles.index("Back in line: its back-off ended") < 2
    api = as_user("member-a").get("/api/v1/workloads/team-a/wl-story/").json()
    assert api["gpu_hours"] == pytest.approx(3.0)
    assert api["pods"] == [
        {
            "name": "wl-story-0",
            "phase": "Running",
            "node": "gpu-node-1",
            "gpu_requests": {"nvidia.com/mig-3g.40gb": 1},
            "started_at": None,
        }
    ]
    assert api["story"][0]["title"] == "Created"


def test_the_poll_keeps_kueues_conditions_and_no_more() -> None:
    values = workload_values(
        {
            "metadata": {"name": "w", "namespace": "n"},
            "status": {
                "conditions": [
                    {
                        "type": "Finished",
                        "status": "True",
                        "reason": "Succeeded",
                        "message": "Job finished successfully",
                        "lastTransitionTime": "2026-11-30T10:42:00Z",
                        "observedGeneration": 3,
                    },
                    {"status": "True"},
                ]
            },
        }
    )
    assert values["conditions"] == [
        {
            "type": "Finished",
            "status": "True",
            "reason": "Succeeded",
            "message": "Job finished successfully",
            "lastTransitionTime": "2026-11-30T10:42:00Z",
        }
    ]


def grow(count: int, start: int) -> None:
    now = timezone.now()
    ObservedWorkload.objects.bulk_create(
        ObservedWorkload(
            cluster_id=settings_cluster_id(),
            namespace="team-a" if index % 2 else "team-b",
            name=f"grown-{index:05d}",
            queue_name="team-a-train",
            admitted=bool(index % 3),
            created_at=now - dt.timedelta(minutes=index),
            requests={GPU: 1},
            last_changed=now,
        )
        for index in range(start, start + count)
    )


def queries(client: Client, path: str) -> int:
    with CaptureQueriesContext(connection) as captured:
        response = client.get(path)
    assert response.status_code == 200, response.content[:300]
    return len(captured)


@pytest.mark.parametrize("username", ["lead-a", "admin"])
def test_the_query_count_does_not_grow_with_the_workloads(demo: None, username: str) -> None:
    client = as_user(username)
    client.get("/workloads/")  # the session's first look
    grow(4, 0)
    small = [queries(client, p) for p in ("/workloads/", "/api/v1/workloads/?state=admitted")]
    grow(120, 4)
    large = [queries(client, p) for p in ("/workloads/", "/api/v1/workloads/?state=admitted")]
    assert large == small, (small, large)
    assert len(listed(client.get("/workloads/").content.decode())) == 50  # 50 a page
    # A page after the last falls back to the last, its rows named as any page's are.
    last = client.get("/workloads/?page=999").content.decode()
    assert listed(last) and '<td data-label="Team">team-a</td>' in last


def test_the_home_queues_and_node_pages_link_to_a_workloads_page(demo: None) -> None:
    """Every page that names a workload links to its page; another team's stays unnamed."""
    some(demo)
    ObservedNodeFactory(name="gpu-node-9", first_seen=timezone.now(), last_changed=timezone.now())
    ObservedPod.objects.create(
        namespace="team-a",
        name="wl-running-0",
        node_name="gpu-node-9",
        phase="Running",
        gpu_requests={GPU: 2},
        workload_name="wl-running",
        last_changed=timezone.now(),
    )
    on = cluster_name()
    lead = as_user("lead-a")
    home = lead.get("/").content.decode()
    assert f'href="/workloads/{on}/team-a/wl-waiting/"' in home
    queues = lead.get("/queues/").content.decode()
    assert f'href="/workloads/{on}/team-a/wl-waiting/"' in queues
    assert "wl-of-team-b" not in queues and "/workloads/default/team-b/" not in queues
    node = lead.get("/fleet/nodes/gpu-node-9/").content.decode()
    assert f'href="/workloads/{on}/team-a/wl-running/"' in node
    # The page's live part, as htmx asks for it again while the page is open.
    live = lead.get(f"/workloads/{on}/team-a/wl-waiting/", HTTP_HX_REQUEST="true")
    text = live.content.decode()
    assert text.startswith('\n<div id="workload-live"') or text.lstrip().startswith(
        '<div id="workload-live"'
    )
    assert "<html" not in text and "#2 in line" in text


def recorded_story() -> dict[str, Any]:
    """Real Kueue's preemption (tests/data/kueue-samples/events-workload-story.json) as a
    poll keeps it: the Workloads' rows and the Events about them."""
    recording = json.loads((SAMPLES / "events-workload-story.json").read_text())
    now = timezone.now()
    for item in recording["workloads"]:
        ObservedWorkload.objects.create(last_changed=now, **workload_values(item))
    events = {}
    for event in recording["items"]:
        values = workload_event_values(event)
        assert values is not None
        events[values["namespace"], values["name"]] = values
    write_events(events, recording["workloads"], cluster_id=settings_cluster_id(), now=now)
    return dict(recording)


def test_kueues_events_tell_the_story_in_words_and_name_only_what_the_viewer_may(
    demo: None,
) -> None:
    recording = recorded_story()
    victim, preemptor = recording["victim"], recording["preemptor"]
    lead = as_user("lead-a").get(f"/api/v1/workloads/team-a/{victim}/").json()
    reasons = [e["reason"] for e in lead["events"]]
    assert reasons == [
        "Quota reserved",
        "Admitted",
        "Evicted: it was preempted for other work",
        "Preempted",
        "Waiting for quota",
        "Waiting for quota",
    ]
    preempted = lead["events"][3]
    assert preempted["message"].startswith(
        "Preempted to accommodate a workload (another team's workload) due to reclamation "
        "within the cohort; preemptor path: /gpu-fleet/ai-platform/cq-infer"
    )
    assert preempted["count"] == 1 and preempted["tone"] == "bad"
    assert preemptor not in json.dumps(lead) and "team-infer" not in json.dumps(lead)
    titles = [m["title"] for m in lead["story"]]
    # The conditions the events tell already are not told twice.
    assert titles.count("Evicted: it was preempted for other work") == 1
    assert [t for t, m in zip(titles, lead["story"], strict=True) if m["origin"] != "event"] == [
        "Created",
        "Its pods are not ready: waiting for its pods to start",
        "Not admitted: no reservation",
        "Back in line: it was preempted for other work",  # its message redacted as the event's
    ]
    assert "(another team's workload)" in lead["story"][7]["detail"]
    admin = as_user("admin").get(f"/api/v1/workloads/team-a/{victim}/").json()
    assert f"(Workload team-infer/{preemptor})" in admin["events"][3]["message"]
    # The preemptor's own story names its victim to whom may see it, and never to its lead.
    path = f"/workloads/{cluster_name()}/team-infer/{preemptor}/"
    infer = as_user("lead-infer").get(path).content.decode()
    assert "Preempted another team&#x27;s workload in ClusterQueue cq-train" in infer
    assert victim not in infer
    assert "event \N{MULTIPLICATION SIGN} 2" in infer  # Kueue's series: the same Pending twice
    assert f"Preempted workload team-a/{victim}" in as_user("approver").get(path).content.decode()
    assert as_user("lead-a").get(path).status_code == 404


def test_kueues_pending_is_the_portals_waiting(demo: None) -> None:
    some(demo)
    lead = as_user("lead-a")
    for path in ("/api/v1/workloads/?q=wl-&state=pending", "/workloads/?q=wl-&state=pending"):
        answer = lead.get(path)
        assert answer.status_code == 200, path
    api = lead.get("/api/v1/workloads/?q=wl-&state=pending").json()["results"]
    assert [(r["name"], r["state"]) for r in api] == [("wl-waiting", "waiting")]
    page = lead.get("/workloads/?q=wl-&state=pending").content.decode()
    assert listed(page) == ["team-a/wl-waiting"]
    assert '<option value="waiting" selected>' in page
