"""The quota what-if where decisions are made: the queue editor's preview, a quota request
before its decision, and ``POST /api/v1/what-if/`` (the same simulation, team-scoped)."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from changes.quota import request_quota_change
from cluster.models import ObservedCreateFailure, ObservedObject, ObservedWorkload
from queues import whatif
from queues.models import ClusterQueue
from tenants.models import Namespace, Team
from tests.factories import demo_fleet_nodes
from tests.support import bearer, served_schema
from tests.unit.portal.test_api_contract import assert_conforms
from tests.unit.queues.test_views import form_of

pytestmark = pytest.mark.django_db

GPU = "nvidia.com/gpu"
EDIT = "/queues/cluster-queues/cq-train/edit/"


def observed(
    namespace: str,
    name: str,
    gpus: int,
    *,
    queue: str = "",
    admitted: bool = False,
    priority: int = 0,
    minutes_ago: int = 10,
) -> ObservedWorkload:
    now = timezone.now()
    return ObservedWorkload.objects.create(
        namespace=namespace,
        name=name,
        queue_name=queue,
        cluster_queue="cq-train" if admitted else "",
        admitted=admitted,
        requests={GPU: gpus},
        flavors={GPU: "h100-80gb"} if admitted else {},
        priority=priority,
        created_at=now - dt.timedelta(minutes=minutes_ago),
        admitted_at=now if admitted else None,
        last_changed=now,
    )


def cq_train_full(extra: int = 0) -> None:
    """cq-train's 12 H100 GPUs in use by team-a, team-b's 8-GPU job waiting; ``extra`` more
    small waiting workloads of team-a (for the query counts)."""
    observed("team-a", "train-12", 12, admitted=True)
    observed("team-b", "job-big-train", 8, queue="team-b-train", minutes_ago=5)
    for i in range(extra):
        observed("team-a", f"small-{i}", 1, queue="team-a-train", minutes_ago=1)


def login(client: Client, username: str) -> Client:
    client.force_login(User.objects.get(username=username))
    return client


def preview(client: Client, **changes: str) -> Any:
    cq = ClusterQueue.objects.get(name="cq-train")
    return client.post(EDIT, {**form_of(cq, **changes), "action": "preview"})


def test_the_queue_editor_shows_who_a_nominal_increase_admits(client: Client, demo: None) -> None:
    demo_fleet_nodes()
    cq_train_full()
    login(client, "admin")
    page = preview(client, g0f0r0_nominal="20").content.decode()
    assert "What Kueue would do with this quota" in page
    admitted = page.split('id="what-if-admitted"')[1].split("</ol>")[0]
    assert "<strong>team-b/job-big-train</strong> in <code>cq-train</code>" in admitted
    assert "<code>h100-80gb</code> (nvidia.com/gpu)" in admitted
    assert "borrows" not in admitted
    assert "No admitted workload would be preempted." in page
    assert "Partial admission" in page.split('id="what-if-not-modelled"')[1]
    # Without the increase it still waits, and the page says why.
    same = preview(client).content.decode()
    assert "No waiting workload would be admitted." in same
    assert "team-b/job-big-train in <code>cq-train</code>: Does not fit" in same


def test_the_page_and_the_api_say_when_the_change_reaches_too_many_workloads(
    client: Client, demo: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past the most workloads the what-if takes on, the editor says it did not simulate,
    and why, instead of showing an empty outcome; the API answers the same in ``gave_up``."""
    cq_train_full()
    login(client, "admin")
    page = preview(client, g0f0r0_nominal="20").content.decode()
    assert 'id="what-if-gave-up"' not in page
    assert "(the queues of its cohort tree on its flavors: no other queue shares quota" in page
    monkeypatch.setattr(whatif, "MOST_WORKLOADS", 1)
    page = preview(client, g0f0r0_nominal="20").content.decode()
    gave_up = page.split('id="what-if-gave-up"')[1].split("</p>")[0]
    assert '<span class="tag warn">not simulated</span>' in gave_up
    assert "2 workloads are in" in gave_up
    assert "more than the 1 the simulation takes on" in gave_up
    assert 'id="what-if-admitted"' not in page
    body = {"cluster_queue": "cq-train", "flavor": "h100-80gb", "resource": GPU}
    answer = post(client, "admin", {**body, "nominal_quota": "20"}).json()
    assert answer["gave_up"].startswith("2 workloads are in")
    assert answer["admitted"] == []


def test_bad_quotas_show_field_errors_and_no_simulation(client: Client, demo: None) -> None:
    cq_train_full()
    login(client, "admin")
    response = preview(client, g0f0r0_nominal="lots")
    assert response.status_code == 422
    body = response.content.decode()
    assert 'id="g0f0r0_nominal-error"' in body
    assert "What Kueue would do" not in body


def test_the_preview_reads_a_fixed_number_of_queries(client: Client, demo: None) -> None:
    demo_fleet_nodes()
    login(client, "admin")
    counts = []
    for extra in (1, 30):
        ObservedWorkload.objects.all().delete()
        cq_train_full(extra)
        with CaptureQueriesContext(connection) as queries:
            assert preview(client, g0f0r0_nominal="20").status_code == 200
        counts.append(len(queries))
    assert counts[0] == counts[1]


def ask(username: str, **values: Any) -> Any:
    return request_quota_change(
        actor=User.objects.get(username=username),
        team=Team.objects.get(slug="team-a"),
        reason="A deadline.",
        **values,
    )


def ask_for_cq_train() -> Any:
    """An admin's request for 16 H100 GPUs in cq-train (one for the team-a lead to read)."""
    return ask(
        "admin",
        kind="queue",
        cluster_queue=ClusterQueue.objects.get(name="cq-train"),
        flavor="h100-80gb",
        resource=GPU,
        requested="16",
    )


def test_a_queue_request_shows_the_simulation_and_hides_other_teams(
    client: Client, demo: None
) -> None:
    demo_fleet_nodes()
    cq_train_full()
    change = ask_for_cq_train()
    page = login(client, "approver").get(f"/quota/{change.pk}/").content.decode()
    assert "<strong>team-b/job-big-train</strong>" in page.split('id="what-if-admitted"')[1]
    lead = login(client, "lead-a").get(f"/quota/{change.pk}/").content.decode()
    assert "job-big-train" not in lead
    assert "<strong>another team&#x27;s workload</strong>" in lead


def test_a_quota_request_page_reads_a_fixed_number_of_queries(client: Client, demo: None) -> None:
    demo_fleet_nodes()
    cq_train_full()
    change = ask_for_cq_train()
    login(client, "approver")
    counts = []
    for extra in (1, 30):
        ObservedWorkload.objects.exclude(name__in=["train-12", "job-big-train"]).delete()
        for i in range(extra):
            observed("team-a", f"small-{i}", 1, queue="team-a-train", minutes_ago=1)
        with CaptureQueriesContext(connection) as queries:
            assert client.get(f"/quota/{change.pk}/").status_code == 200
        counts.append(len(queries))
    assert counts[0] == counts[1]


def test_a_namespace_request_shows_whose_pods_the_quota_lets_in(client: Client, demo: None) -> None:
    observed("team-a", "eval-8", 8, queue="team-a-train")
    ObservedObject.objects.create(
        api_version="v1",
        kind="ResourceQuota",
        namespace="team-a",
        name="team-a-gpu-quota",
        status={"used": {"requests.nvidia.com/gpu": "12"}},
        last_seen=timezone.now(),
    )
    ObservedCreateFailure.objects.create(
        namespace="team-a",
        kind="Job",
        name="eval-sweep",
        message='Error creating: pods "eval-sweep-x" is forbidden: exceeded quota: '
        "team-a-gpu-quota, requested: requests.nvidia.com/gpu=12, used: "
        "requests.nvidia.com/gpu=12, limited: requests.nvidia.com/gpu=16",
        last_seen=timezone.now(),
    )
    change = ask(
        "lead-a",
        kind="namespace",
        namespace=Namespace.objects.get(name="team-a"),
        resource="requests.nvidia.com/gpu",
        requested="24",
    )
    page = login(client, "lead-a").get(f"/quota/{change.pk}/").content.decode()
    table = page.split('id="what-if-namespace"')[1].split("</table>")[0]
    rows = table.split("<tr>")[2:]
    # The refused pod first (12 + 12 fits 24), then the waiting workload (12 + 12 + 8 not).
    assert rows[0].startswith('<td class="head">Job team-a/eval-sweep (its next pod)</td>')
    assert (
        '"Fits now"><span class="warn">no</span></td><td data-label="Fits after"><span class="ok">'
        "yes</span>" in rows[0]
    )
    assert rows[1].startswith(
        '<td class="head">team-a/eval-8</td><td data-label="Asks for">8 <code>nvidia.com/gpu'
    )
    assert rows[1].count('<span class="warn">no</span>') == 2
    assert "In use now, as the cluster counted it: 12" in page


# ----------------------------------------------------------------------------- API


def post(client: Client, user: str, body: dict[str, Any]) -> Any:
    return client.post(
        "/api/v1/what-if/", json.dumps(body), content_type="application/json", headers=bearer(user)
    )


def test_the_api_answers_the_same_simulation(client: Client, demo: None) -> None:
    cq_train_full()
    body = {"cluster_queue": "cq-train", "flavor": "h100-80gb", "resource": GPU}
    answer = post(client, "admin", {**body, "nominal_quota": "20"})
    assert answer.status_code == 200
    schema = served_schema(client)
    assert_conforms(schema, "WhatIfResult", answer.json())
    assert schema["components"]["schemas"]["WhatIfRequestRequest"]["additionalProperties"] is False
    first = answer.json()["admitted"][0]
    assert first == {
        "order": 1,
        "workload": "team-b/job-big-train",
        "cluster_queue": "cq-train",
        "flavors": {GPU: "h100-80gb"},
        "borrows": False,
        "preempts": [],
    }
    assert (
        post(client, "lead-a", {**body, "nominal_quota": "20"}).json()["admitted"][0]["workload"]
        == "another team's workload"
    )


def test_the_api_refuses_bad_input_with_field_errors(client: Client, demo: None) -> None:
    body = {"cluster_queue": "cq-train", "flavor": "h100-80gb", "resource": GPU}

    def errors(extra: dict[str, Any]) -> Any:
        answer = post(client, "admin", {**body, **extra})
        assert answer.status_code == 400
        return answer.json()["errors"]

    assert errors({}) == {
        "nominal_quota": ["Give nominal_quota, borrowing_limit or lending_limit."]
    }
    assert "resource_groups" in errors({"nominal_quota": "-3"})
    assert errors({"flavor": "nope", "nominal_quota": "3"}) == {
        "flavor": ["ClusterQueue cq-train has no quota of nvidia.com/gpu there."]
    }
    assert "cluster_queue" in errors({"namespace": "team-a", "hard": "3"})
    assert errors({"nominal_quota": "3", "colour": "red"}) == {"colour": ["Unknown field."]}
    assert (
        post(client, "admin", {**body, "cluster_queue": "gone", "nominal_quota": "3"}).status_code
        == 404
    )


def test_the_api_keeps_namespaces_to_their_teams(client: Client, demo: None) -> None:
    body = {"namespace": "team-b", "resource": "requests.nvidia.com/gpu", "hard": "12"}
    assert post(client, "lead-a", body).status_code == 404
    mine = post(client, "lead-a", {**body, "namespace": "team-a"})
    assert mine.status_code == 200 and mine.json()["resource"] == GPU
    assert_conforms(served_schema(client), "WhatIfResult", mine.json())
    bad = post(client, "lead-a", {**body, "namespace": "team-a", "hard": "x"})
    assert bad.status_code == 400 and bad.json()["errors"].keys() == {"hard"}


def test_the_htmx_preview_carries_the_simulation(client: Client, demo: None) -> None:
    cq_train_full()
    login(client, "admin")
    cq = ClusterQueue.objects.get(name="cq-train")
    response = client.post(
        EDIT,
        {**form_of(cq, g0f0r0_nominal="20"), "action": "preview"},
        headers={"HX-Request": "true"},
    )
    body = response.content.decode()
    assert response.status_code == 200
    assert '<section class="card" aria-labelledby="what-if-title" id="what-if">' in body
    assert "<strong>team-b/job-big-train</strong>" in body


def test_with_volcano_queues_there_is_no_simulation(
    client: Client, demo: None, settings: Any
) -> None:
    settings.QM_QUEUE_BACKEND = "volcano"
    cq_train_full()
    login(client, "admin")
    page = preview(client, g0f0r0_nominal="20").content.decode()
    assert "What Kueue would do" not in page
    body = {"cluster_queue": "cq-train", "flavor": "h100-80gb", "resource": GPU}
    answer = post(client, "admin", {**body, "nominal_quota": "20"})
    assert answer.status_code == 409 and answer.json()["code"] == "not_kueue"
