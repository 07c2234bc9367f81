"""MIG change pages: the form with its live preview, the request page, decisions, scoping."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone

from changes.models import MigChangeRequest
from cluster.models import ObservedNode
from tests.factories import MigChangeRequestFactory, ObservedNodeFactory, ObservedPodFactory
from tests.support import written

pytestmark = pytest.mark.django_db


@pytest.fixture
def observed(demo: None) -> None:
    now = timezone.now()
    for name, config, alloc in [
        ("gpu-a100-01", "all-3g.40gb", {"nvidia.com/mig-3g.40gb": "16"}),
        (
            "gpu-a100-03",
            "all-balanced",
            {"nvidia.com/mig-2g.20gb": "8", "nvidia.com/mig-1g.10gb": "16"},
        ),
    ]:
        ObservedNodeFactory(
            name=name,
            gpu_product="NVIDIA-A100-SXM4-80GB",
            gpu_count=8,
            mig_config=config,
            mig_config_state="success",
            labels={"quartermaster.io/pool": "train", "nvidia.com/mig.config": config},
            allocatable=alloc,
            ready=True,
            first_seen=now,
            last_changed=now,
        )
    ObservedPodFactory(
        namespace="team-b",
        name="dev-test-1g",
        node_name="gpu-a100-03",
        phase="Running",
        gpu_requests={"nvidia.com/mig-1g.10gb": 4},
        last_changed=now,
    )


def login(client: Client, name: str) -> User:
    user = User.objects.get(username=name)
    client.force_login(user)
    return user


def ask_incident_fix(reason: str = "back to training", **extra: Any) -> MigChangeRequest:
    """lead-a asks to move gpu-a100-03 back to all-3g.40gb (the seed incident's fix)."""
    from changes.mig import request_mig_change
    from tenants.models import Team

    return request_mig_change(
        actor=User.objects.get(username="lead-a"),
        team=Team.objects.get(slug="team-a"),
        nodes=["gpu-a100-03"],
        target_config="all-3g.40gb",
        reason=reason,
        **extra,
    )


def test_the_form_offers_only_configs_for_the_chosen_nodes(client: Client, observed: None) -> None:
    login(client, "lead-a")
    page = client.get("/changes/new/").content.decode()
    assert "Choose nodes first" in page
    response = client.post(
        "/changes/preview/",
        {"nodes": ["gpu-a100-03"], "target_config": "all-3g.40gb", "team": "1"},
        headers={"HX-Request": "true"},
    )
    fragment = response.content.decode()
    assert fragment.lstrip().startswith('<form id="change-form"')
    assert '<option value="all-3g.40gb" selected>' in fragment
    assert "all-1g.5gb" not in fragment and "all-1g.6gb" not in fragment
    assert "team-b/dev-test-1g" not in fragment  # another team's pod: counted, never named
    assert "1 pod in team-b" in fragment
    assert "Impact:" in fragment


def test_the_form_opened_with_nodes_and_a_config_shows_the_impact_at_once(
    client: Client, observed: None
) -> None:
    login(client, "lead-a")
    page = client.get("/changes/new/?nodes=gpu-a100-03&target_config=all-3g.40gb").content
    assert b"Impact:" in page and b"1 pod in team-b" in page  # another team's: counted
    assert b'<option value="all-3g.40gb" selected>' in page
    refused = client.post(  # no reason given: refused, the impact still shown
        "/changes/new/",
        {"team": "1", "nodes": ["gpu-a100-03"], "target_config": "all-3g.40gb", "reason": ""},
    ).content
    assert b"Impact:" in refused and b"1 pod in team-b" in refused
    for partial in (
        "?nodes=gpu-a100-03",
        "?target_config=all-3g.40gb",
        "?nodes=nope&target_config=x",
    ):
        assert b"Impact:" not in client.get(f"/changes/new/{partial}").content, partial


def test_nodes_of_two_gpu_models_are_told_to_choose_one_and_evictions_stay_notes(
    client: Client, observed: None
) -> None:
    now = timezone.now()
    ObservedNodeFactory(
        name="gpu-h100-01",
        gpu_product="NVIDIA-H100-80GB-HBM3",
        gpu_count=8,
        mig_config="all-disabled",
        mig_config_state="success",
        allocatable={"nvidia.com/gpu": "8"},
        ready=True,
        first_seen=now,
        last_changed=now,
    )
    login(client, "lead-a")
    fragment = client.post(
        "/changes/preview/",
        {"nodes": ["gpu-a100-03", "gpu-h100-01"], "target_config": "all-3g.40gb"},
        headers={"HX-Request": "true"},
    ).content.decode()
    assert (
        "These nodes have 2 GPU models (A100-80GB: gpu-a100-03; H100-80GB: gpu-h100-01): "
        "choose nodes of one model, as each model takes its own configs." in fragment
    )
    assert "Configs valid for" not in fragment
    assert "<li>The nodes have different GPU models; request one change per model.</li>" in fragment
    assert '<li class="muted">1 GPU pod of team-b must be evicted first' in fragment
    assert "Nothing runs while the change is blocked" in fragment  # no tables of a change
    assert "Queue changes carried" not in fragment and "Fleet capacity" not in fragment
    response = client.post(
        "/api/v1/mig-changes/",
        {
            "team": "team-a",
            "nodes": ["gpu-a100-03", "gpu-h100-01"],
            "target_config": "all-3g.40gb",
            "reason": "x",
        },
        content_type="application/json",
    )
    assert response.status_code == 400
    assert response.json()["errors"] == {
        "nodes": ["The nodes have different GPU models; request one change per model."]
    }


def test_asking_creates_a_pending_request_and_errors_show_per_field(
    client: Client, observed: None
) -> None:
    from tenants.models import Team

    login(client, "lead-a")
    team = Team.objects.get(slug="team-a").pk
    response = client.post(
        "/changes/new/",
        {"team": team, "nodes": ["gpu-a100-03"], "target_config": "all-3g.40gb", "reason": ""},
    )
    assert "Say why" in response.content.decode()
    assert not MigChangeRequest.objects.exists()
    response = client.post(
        "/changes/new/",
        {
            "team": team,
            "nodes": ["gpu-a100-03"],
            "target_config": "all-3g.40gb",
            "reason": "back to training",
        },
    )
    change = MigChangeRequest.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/changes/{change.pk}/"
    assert change.state == "pending"


def test_a_window_in_the_past_is_refused_next_to_its_field(client: Client, observed: None) -> None:
    from tenants.models import Team

    login(client, "lead-a")
    for htmx in ({}, {"HX-Request": "true"}):
        response = client.post(
            "/changes/new/",
            {
                "team": Team.objects.get(slug="team-a").pk,
                "nodes": ["gpu-a100-03"],
                "target_config": "all-3g.40gb",
                "reason": "back to training",
                "window_start": "2001-02-03T04:05",
            },
            headers=htmx,
        )
        assert response.status_code == 200
        page = response.content.decode()
        field = page[page.index('id="field-window_start"') :]
        field = field[: field.index("</div>")]
        assert 'value="2001-02-03T04:05" aria-invalid="true"' in field
        assert "2001-02-03 04:05 is in the past" in field
    assert not MigChangeRequest.objects.exists()


def test_a_grant_ending_in_the_past_is_refused_with_the_other_errors(
    client: Client, observed: None
) -> None:
    login(client, "lead-a")
    response = client.post("/quota/new/", {"requested": "", "grant_until": "2001-02-03T04:05"})
    page = response.content.decode()
    assert "2001-02-03 04:05 is in the past" in page
    assert 'name="grant_until" value="2001-02-03T04:05" aria-invalid="true"' in page
    assert '<div id="id_grant_until_error"><p class="error" role="alert">2001-02-03' in page


def test_an_approver_decides_on_the_request_page(client: Client, observed: None) -> None:
    change = ask_incident_fix()
    login(client, "lead-a")
    page = client.get(f"/changes/{change.pk}/").content.decode()
    assert "Approve" not in page  # not for the requester
    login(client, "approver")
    assert f"#{change.pk}" in client.get("/changes/").content.decode()  # in the inbox
    assert "Approve" in client.get(f"/changes/{change.pk}/").content.decode()
    page = client.get(f"/changes/{change.pk}/").content.decode()
    assert change.verdict == "breaks_quota" and "I have read why" in page
    refused = client.post(f"/changes/{change.pk}/approve/", {"comment": "ok"}, follow=True)
    assert "tick “I have read why” to approve a change that breaks quota" in (
        refused.content.decode()
    )
    change.refresh_from_db()
    assert change.state == "pending"
    client.post(f"/changes/{change.pk}/approve/", {"comment": "ok", "confirm": "yes"})
    change.refresh_from_db()
    assert change.state == "approved"
    assert (
        client.get(
            f"/changes/{change.pk}/?part=timeline", headers={"HX-Request": "true"}
        ).status_code
        == 200
    )


def test_a_stale_mig_approval_says_what_changed_on_the_page(client: Client, observed: None) -> None:

    change = ask_incident_fix()
    login(client, "approver")
    page = client.get(f"/changes/{change.pk}/").content.decode()
    seen = change.assessment["fingerprint"]
    assert f'name="fingerprint" value="{seen}"' in page
    ObservedPodFactory(
        namespace="team-b",
        name="arrived-later",
        node_name="gpu-a100-03",
        gpu_requests={"nvidia.com/mig-1g.10gb": 1},
    )
    answer = client.post(
        f"/changes/{change.pk}/approve/",
        {"comment": "ok", "fingerprint": seen, "confirm": "yes"},
        follow=True,
    ).content.decode()
    assert "2 GPU pods would be evicted (was 1)" in answer
    assert "read it and decide again" in answer
    change.refresh_from_db()
    assert change.state == "pending"
    assert f'name="fingerprint" value="{change.assessment["fingerprint"]}"' in answer


def test_a_window_next_year_is_shown_with_its_year(client: Client, observed: None) -> None:

    window = timezone.localtime(timezone.now()).replace(month=3, day=4, hour=5, minute=6)
    window = window.replace(year=window.year + 1)
    change = ask_incident_fix(reason="back to training", window_start=window)
    login(client, "lead-a")
    page = client.get(f"/changes/{change.pk}/").content.decode()
    assert f">4 Mar {window.year}, 05:06</time>" in page  # not this year: with its year
    created = timezone.localtime(change.created_at)
    assert f">{created.day} {created:%b}, {created:%H:%M}</time>" in page  # this year's: none
    assert (
        f">{created.day} {created:%b}, {created:%H:%M}</time>"
        in client.get("/changes/").content.decode()
    )


def test_a_change_is_read_by_the_teams_it_hits_and_404_for_others(
    client: Client, observed: None
) -> None:

    change = ask_incident_fix(reason="x")
    login(client, "lead-b")  # team-b's pod is evicted: lead-b reads it, its own pod named
    page = client.get(f"/changes/{change.pk}/").content.decode()
    assert "team-b/dev-test-1g" in page and "Teams this change hits" in page
    assert "Approve" not in page and "Cancel the request" not in page
    assert client.post(f"/changes/{change.pk}/cancel/").status_code == 403
    assert f"MIG change #{change.pk}" in client.get("/").content.decode()  # told at home
    login(client, "lead-a")  # the asking lead: team-b's pod counted, not named
    page = client.get(f"/changes/{change.pk}/").content.decode()
    assert "team-b/dev-test-1g" not in page and "1 pod in team-b" in page
    login(client, "lead-infer")  # untouched by it
    assert client.get(f"/changes/{change.pk}/").status_code == 404
    assert client.post(f"/changes/{change.pk}/cancel/").status_code == 404
    login(client, "viewer-dev")
    assert client.get("/changes/new/").status_code == 403


def test_the_timeline_stops_polling_when_the_request_is_done(
    client: Client, observed: None
) -> None:
    from changes.mig import reject_mig_change

    change = ask_incident_fix(reason="x")
    reject_mig_change(
        request_id=change.pk, approver=User.objects.get(username="approver"), comment="no"
    )
    login(client, "lead-a")
    response = client.get(f"/changes/{change.pk}/?part=timeline", headers={"HX-Request": "true"})
    assert response.status_code == 286


def ask_team_a_gpus(client: Client, requested: str, reason: str) -> Any:
    """Post the quota form: team-a's namespace quota of requests.nvidia.com/gpu."""
    from tenants.models import Namespace, Team

    return client.post(
        "/quota/new/",
        {
            "team": Team.objects.get(slug="team-a").pk,
            "kind": "namespace",
            "namespace": Namespace.objects.get(name="team-a").pk,
            "resource": "requests.nvidia.com/gpu",
            "requested": requested,
            "reason": reason,
        },
    )


def test_quota_request_pages(client: Client, observed: None) -> None:
    from changes.models import QuotaChangeRequest
    from tenants.models import Namespace

    login(client, "lead-a")
    assert client.get("/quota/new/").status_code == 200
    response = ask_team_a_gpus(client, "2.5", "")
    page = response.content.decode()
    assert "must be a whole number" in page and "Say why the team needs it." in page
    ask_team_a_gpus(client, "8", "deadline")
    change = QuotaChangeRequest.objects.get()
    assert "Approve" not in client.get(f"/quota/{change.pk}/").content.decode()
    login(client, "lead-b")
    assert client.get(f"/quota/{change.pk}/").status_code == 404
    login(client, "approver")
    assert f"#{change.pk}" in client.get("/quota/").content.decode()
    client.post(f"/quota/{change.pk}/approve/", {"comment": "ok"})
    change.refresh_from_db()
    assert change.state == "approved"
    assert (
        Namespace.objects.get(name="team-a")
        .quota_items.get(resource="requests.nvidia.com/gpu")
        .hard
        == "8"
    )


def test_a_stale_quota_approval_says_so_on_the_page_and_the_lead_cancels(
    client: Client, observed: None
) -> None:
    from changes.models import QuotaChangeRequest
    from tenants.models import QuotaItem

    login(client, "lead-a")
    ask_team_a_gpus(client, "12", "smaller run")
    change = QuotaChangeRequest.objects.get()
    twice = ask_team_a_gpus(client, "10", "smaller still").content.decode()
    assert f"Request #{change.pk} for this quota (12) is still waiting" in twice
    login(client, "approver")
    page = client.get(f"/quota/{change.pk}/").content.decode()
    assert "Approve 16 → 12" in page and "Cancel this request" not in page
    QuotaItem.objects.filter(resource="requests.nvidia.com/gpu", namespace__name="team-a").update(
        hard="8"
    )
    fingerprint = change.assessment["fingerprint"]
    answer = client.post(
        f"/quota/{change.pk}/approve/", {"comment": "ok", "fingerprint": fingerprint}, follow=True
    ).content.decode()
    assert "The quota is now 8 (it was 16 when this was asked)" in answer
    assert "Approve 8 → 12" in answer  # the page shows the new assessment to decide on
    login(client, "lead-a")
    assert "Cancel this request" in client.get(f"/quota/{change.pk}/").content.decode()
    client.post(f"/quota/{change.pk}/cancel/")
    change.refresh_from_db()
    assert change.state == "cancelled"


def test_home_tells_the_team_when_a_grant_ends(client: Client, observed: None) -> None:
    import datetime as dt

    from changes.quota import approve_quota_change, request_quota_change
    from tenants.models import Namespace, Team

    grant = request_quota_change(
        actor=User.objects.get(username="lead-a"),
        team=Team.objects.get(slug="team-a"),
        kind="namespace",
        namespace=Namespace.objects.get(name="team-a"),
        resource="requests.nvidia.com/gpu",
        requested="12",
        reason="deadline",
        grant_until=timezone.now() + dt.timedelta(hours=20),
    )
    approve_quota_change(
        request_id=grant.pk, approver=User.objects.get(username="approver"), comment="ok"
    )
    login(client, "member-a")
    page = client.get("/").content.decode()
    assert "Time-limited quota" in page and "then the 4 it cut is given back" in page


def test_home_explains_the_incident_and_offers_the_fix(client: Client, observed: None) -> None:
    from cluster.models import Drift

    now = timezone.now()
    ObservedNode.objects.filter(name="gpu-a100-01").update(allocated={"nvidia.com/mig-3g.40gb": 16})
    Drift.objects.create(
        kind="mig_layout",
        subject="gpu-a100-03",
        field="nvidia.com/mig.config",
        desired="all-3g.40gb",
        observed="all-balanced (success)",
        first_seen=now,
        last_seen=now,
    )
    ObservedPodFactory(
        namespace="team-a",
        name="train-3g",
        phase="Pending",
        gpu_requests={"nvidia.com/mig-3g.40gb": 1},
        pending_message="0/5 nodes are available: 2 node(s) had untolerated taint(s), 3 Insufficient "
        "nvidia.com/mig-3g.40gb. no new claims to deallocate, preemption: …",
        last_changed=now,
    )
    written()  # what the poll does after writing the rows
    login(client, "lead-a")
    page = client.get("/").content.decode()
    assert (
        "All 16 mig-3g.40gb in the fleet are in use (0 free, the pod needs 1): gpu-a100-03 would offer 16 more"
        in page
    )
    fix = "/changes/new/?cluster=default&amp;nodes=gpu-a100-03&amp;target_config=all-3g.40gb"
    assert f'href="{fix}"' in page  # the fix names the cluster the node is on
    login(client, "member-a")  # a member reads why, and is not sent to a form they may not use
    member = client.get("/").content.decode()
    assert "would offer 16 more" in member and "nodes=gpu-a100-03" not in member
    assert "your team's lead can ask for it" in member
    login(client, "lead-a")
    form = client.get("/changes/new/?nodes=gpu-a100-03&target_config=all-3g.40gb").content.decode()
    assert 'value="gpu-a100-03"' in form and "checked" in form
    assert '<option value="all-3g.40gb" selected>' in form


def test_paging_a_filtered_list_keeps_its_filter(client: Client, demo: None) -> None:
    from changes.views import LIST_PAGE_SIZE
    from tenants.models import Team

    a, b = Team.objects.get(slug="team-a"), Team.objects.get(slug="team-b")
    lead = User.objects.get(username="lead-a")
    MigChangeRequest.objects.bulk_create(
        [
            MigChangeRequestFactory.build(team=team, requested_by=lead, reason=f"r{i}")
            for i in range(LIST_PAGE_SIZE + 5)
            for team in (a, b)
        ]
    )
    login(client, "approver")
    first = client.get("/changes/?team=team-a&state=pending").content.decode()
    assert 'href="?team=team-a&amp;state=pending&amp;page=2"' in first
    second = client.get("/changes/?team=team-a&state=pending&page=2")
    body = second.content.decode()
    assert 'href="?team=team-a&amp;state=pending&amp;page=1"' in body
    cell = '<td data-label="Team">{}</td>'
    assert body.count(cell.format("team-a")) == 5 and cell.format("team-b") not in body
