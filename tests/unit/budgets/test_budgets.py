"""Budgets through their one door: set by platform admins only (a money budget refused until
there are prices), warned once per threshold and period, and, with enforcement on, a spent
budget holds the team's LocalQueues through desired state until an extension is granted."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

import pytest
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from budgets.models import Budget, BudgetWarning
from budgets.rows import rows_of
from budgets.selectors import standings
from budgets.services import (
    check_budgets,
    decide_budget_extension,
    delete_budget,
    request_budget_extension,
    save_budget,
)
from portal.models import AuditEvent, Notification
from portal.vocabulary.errors import DomainError
from queues.manifests import render_local_queue
from queues.models import LocalQueue
from tests.factories import LocalQueueFactory, NamespaceFactory, TeamFactory
from usage.models import Rollup, SamplingState

pytestmark = pytest.mark.django_db

NOW = dt.datetime(2026, 12, 10, 12, tzinfo=dt.UTC)


def used(slug: str, per_day: float) -> None:
    """``per_day`` GPU-hours on each of December's first nine days, rolled up to the 10th."""
    Rollup.objects.bulk_create(
        Rollup(
            period="day",
            start=dt.datetime(2026, 12, day, tzinfo=dt.UTC),
            kind="team",
            owner=slug,
            scope=f"{slug}-work",
            resource="nvidia.com/gpu",
            covered_seconds=86400,
            gpu_seconds=per_day * 3600,
        )
        for day in range(1, 10)
    )
    SamplingState.objects.update_or_create(
        pk=1, defaults={"rolled_up_to": dt.datetime(2026, 12, 10, tzinfo=dt.UTC)}
    )


def budget(team: Any, actor: Any, **values: Any) -> Budget:
    fields = {"amount": Decimal(100), "enforce": False, **values}
    return save_budget(actor=actor, budget=Budget(team=team, **fields), source="web", now=NOW)


def hold(lq: LocalQueue) -> str:
    lq.refresh_from_db()
    manifest = render_local_queue(
        lq, namespace=lq.namespace.name, team_slug="t", cluster_queue_name="cq"
    )
    return str(manifest["spec"]["stopPolicy"])


def test_a_money_budget_is_refused_until_there_are_prices(team_a: Any, platform_admin: Any) -> None:
    with pytest.raises(ValidationError) as refused:
        budget(team_a, platform_admin, unit="money")
    assert refused.value.message_dict["unit"] == [
        "money budgets need prices: a platform admin sets them on Costs → Prices first"
    ]
    assert not Budget.objects.exists() and not AuditEvent.objects.exists()
    with pytest.raises(ValidationError) as custom:
        budget(team_a, platform_admin, period="custom", starts=dt.date(2026, 12, 5))
    assert custom.value.message_dict["ends"] == ["A custom period needs its last day."]
    with pytest.raises(ValidationError) as percent:
        budget(team_a, platform_admin, thresholds=[80, 80])
    assert percent.value.message_dict["thresholds"] == ["Each threshold once."]


def test_only_platform_admins_set_budgets(team_a: Any, team_a_admin: Any) -> None:
    with pytest.raises(PermissionDenied):
        budget(team_a, team_a_admin)
    assert not Budget.objects.exists()


def test_each_threshold_is_told_once_per_period(
    team_a: Any, team_a_member: Any, platform_admin: Any, django_capture_on_commit_callbacks: Any
) -> None:
    used("team-a", 9.5)  # 85.5 of 100
    with django_capture_on_commit_callbacks(execute=True):
        budget(team_a, platform_admin, thresholds=[100, 80])
        check_budgets(now=NOW)
        check_budgets(now=NOW)
    assert list(BudgetWarning.objects.values_list("threshold", flat=True)) == [80]
    told = Notification.objects.filter(user=team_a_member, event="budget.threshold")
    assert [n.title for n in told] == ["Budget of team-a: 80 % used (December 2026)"]
    assert "Used: 85.5 GPU-hours" in told[0].text
    assert AuditEvent.objects.filter(event="budget.threshold").count() == 1
    assert Budget.objects.get().thresholds == [80, 100]  # kept in order


def test_an_enforced_spent_budget_holds_its_teams_queues_only(
    team_a: Any, team_a_member: Any, platform_admin: Any, django_capture_on_commit_callbacks: Any
) -> None:
    mine = LocalQueueFactory(
        name="train", namespace=NamespaceFactory(name="team-a-work", team=team_a)
    )
    theirs = LocalQueueFactory(namespace=NamespaceFactory(team=TeamFactory(slug="team-b")))
    used("team-a", 12)  # 108 of 100
    with django_capture_on_commit_callbacks(execute=True):
        budget(team_a, platform_admin, enforce=True)
    assert (hold(mine), hold(theirs)) == ("Hold", "None")
    assert AuditEvent.objects.filter(event="local_queue.budget_hold", target_id=str(mine.pk))
    held = AuditEvent.objects.get(event="budget.held")
    assert held.actor_name == platform_admin.username
    assert held.new["queues"] == ["team-a-work/train"]
    told = Notification.objects.get(user=team_a_member, event="budget.held")
    assert told.title == "Budget of team-a spent: its queues admit nothing new"
    row = rows_of([Budget.objects.get()], NOW)[0]
    assert row.held and row.enforcement.startswith("Holding queue team-a-work/train:")


def test_without_enforcement_nothing_is_held_and_the_page_says_what_it_would_do(
    team_a: Any, platform_admin: Any
) -> None:
    lq = LocalQueueFactory(
        name="train", namespace=NamespaceFactory(name="team-a-work", team=team_a)
    )
    used("team-a", 12)
    saved = budget(team_a, platform_admin)
    check_budgets(now=NOW)
    assert hold(lq) == "None"
    assert not AuditEvent.objects.filter(event="budget.held").exists()
    assert rows_of([saved], NOW)[0].enforcement == (
        "Enforcement is off: with it on, it would hold queue team-a-work/train now."
    )
    saved.amount = Decimal(1000)  # 12 a day: 1000 reached in 83 days, after December
    saved.save()
    assert rows_of([saved], NOW)[0].enforcement == (
        "Enforcement is off: with it on, it would hold queue team-a-work/train when the "
        "budget is spent (at the rate so far, not this period)."
    )
    saved.amount = Decimal(200)  # 108 by the 10th, 200 on the 17th at 16:00
    saved.save()
    assert rows_of([saved], NOW)[0].enforcement.endswith(
        "when the budget is spent (at the rate so far, around 17 Dec 2026 16:00 UTC)."
    )


def test_an_extension_granted_lifts_the_hold_and_the_team_is_told(
    team_a: Any,
    team_a_admin: Any,
    team_a_member: Any,
    platform_admin: Any,
    django_capture_on_commit_callbacks: Any,
) -> None:
    lq = LocalQueueFactory(namespace=NamespaceFactory(team=team_a), stop_policy="HoldAndDrain")
    other = LocalQueueFactory(namespace=NamespaceFactory(team=team_a))
    used("team-a", 12)
    with django_capture_on_commit_callbacks(execute=True):
        budget(team_a, platform_admin, enforce=True)
        assert (hold(other), hold(lq)) == ("Hold", "HoldAndDrain")
        extension = request_budget_extension(
            actor=team_a_admin, team=team_a, amount="50", reason="A deadline.", now=NOW
        )
        with pytest.raises(PermissionDenied):
            decide_budget_extension(actor=team_a_admin, extension_id=extension.pk, approve=True)
        decide_budget_extension(
            actor=platform_admin, extension_id=extension.pk, approve=True, comment="ok", now=NOW
        )
    assert (hold(other), hold(lq)) == ("None", "HoldAndDrain")  # an admin's own stop stays
    assert standings([Budget.objects.get()], NOW)[Budget.objects.get().pk].limit == 150.0
    events = set(AuditEvent.objects.values_list("event", flat=True))
    assert {"budget.held", "budget_extension.requested", "budget_extension.approved"} <= events
    assert "budget.released" in events
    told = set(Notification.objects.filter(user=team_a_member).values_list("event", flat=True))
    assert {"budget.held", "budget_extension.approved", "budget.released"} <= told
    assert Notification.objects.filter(user=team_a_admin, event="budget_extension.approved")


def test_nobody_grants_their_own_extension(team_a: Any, platform_admin: Any) -> None:
    budget(team_a, platform_admin)
    mine = request_budget_extension(actor=platform_admin, team=team_a, amount="5", reason="x")
    with pytest.raises(DomainError, match="your own"):
        decide_budget_extension(actor=platform_admin, extension_id=mine.pk, approve=True)
    with pytest.raises(ValidationError) as twice:
        request_budget_extension(actor=platform_admin, team=team_a, amount="5", reason="y")
    assert "already has an extension waiting" in twice.value.message_dict["amount"][0]


def test_standings_take_the_same_queries_for_two_budgets_or_twelve(platform_admin: Any) -> None:
    def measured(size: int) -> int:
        budgets = []
        for _ in range(size):
            team = TeamFactory()
            used(team.slug, 3)
            budgets.append(budget(team, platform_admin))
        with CaptureQueriesContext(connection) as queries:
            rows_of(budgets, NOW)
        return len(queries)

    assert measured(2) == measured(12)


def test_the_budgets_page_shows_a_lead_their_own_teams_only(
    team_a: Any, team_a_admin: Any, team_a_member: Any, platform_admin: Any
) -> None:
    LocalQueueFactory(name="train", namespace=NamespaceFactory(name="team-a-work", team=team_a))
    team_b = TeamFactory(slug="team-b")
    LocalQueueFactory(name="secret", namespace=NamespaceFactory(name="team-b-work", team=team_b))
    mine = budget(team_a, platform_admin)
    theirs = budget(team_b, platform_admin)
    client = Client()
    client.force_login(platform_admin)
    page = client.get("/budgets/").content.decode()
    assert "team-a-work/train" in page and "team-b-work/secret" in page
    client.force_login(team_a_admin)
    page = client.get("/budgets/").content.decode()
    assert "team-a-work/train" in page and "team-b" not in page
    assert f'href="/budgets/{mine.pk}/"' in page  # the page, not the API's route of one name
    assert client.get(f"/budgets/{theirs.pk}/").status_code == 404
    assert client.get(f"/budgets/{mine.pk}/").status_code == 200
    assert client.post("/budgets/", {"new-team": theirs.team_id}).status_code == 403
    client.force_login(team_a_member)
    assert client.get(f"/budgets/{mine.pk}/").status_code == 404
    assert "team-a-work" not in client.get("/budgets/").content.decode()


def test_the_api_refuses_a_money_budget_with_its_field_error(
    team_a: Any, team_a_admin: Any, platform_admin: Any
) -> None:
    client = Client()
    client.force_login(platform_admin)
    answer = client.post(
        "/api/v1/budgets/",
        {"team": "team-a", "unit": "money", "amount": "1000"},
        content_type="application/json",
    )
    assert answer.status_code == 400
    assert "money budgets need prices" in answer.content.decode()
    made = client.post(
        "/api/v1/budgets/",
        {"team": "team-a", "amount": "100", "enforce": True},
        content_type="application/json",
    )
    assert made.status_code == 201, made.content
    assert made.json()["standing"]["limit"] == 100.0
    theirs = budget(TeamFactory(slug="team-b"), platform_admin)
    client.force_login(team_a_admin)
    listed = client.get("/api/v1/budgets/").json()
    assert [b["team"] for b in listed["results"]] == ["team-a"]
    assert client.get(f"/api/v1/budgets/{theirs.pk}/").status_code == 404
    asked = client.post(
        f"/api/v1/budgets/{made.json()['id']}/extend/",
        {"amount": "20", "reason": "A deadline."},
        content_type="application/json",
    )
    assert asked.status_code == 201, asked.content
    approve = f"/api/v1/budget-extensions/{asked.json()['id']}/approve/"
    assert client.post(approve, {}, content_type="application/json").status_code == 403
    refused = client.patch(
        f"/api/v1/budgets/{made.json()['id']}/", {"enforce": False}, content_type="application/json"
    )
    assert refused.status_code == 403


def test_a_bad_extension_on_the_page_says_which_field_and_keeps_the_reason(
    team_a: Any, team_a_admin: Any, platform_admin: Any
) -> None:
    mine = budget(team_a, platform_admin)
    client = Client()
    client.force_login(team_a_admin)
    answer = client.post(f"/budgets/{mine.pk}/extend/", {"amount": "-5", "reason": "A deadline."})
    page = answer.content.decode()
    assert answer.status_code == 400
    assert "GPU-hours to add" in page and "greater than or equal to 0.01" in page
    assert "A deadline." in page  # what was typed stays in the form
    assert not mine.extensions.exists()


def test_a_budget_is_removed_only_once_confirmed_having_said_what_it_changes(
    team_a: Any,
    team_a_admin: Any,
    platform_admin: Any,
    django_capture_on_commit_callbacks: Any,
) -> None:
    lq = LocalQueueFactory(
        name="train", namespace=NamespaceFactory(name="team-a-work", team=team_a)
    )
    used("team-a", 12)  # 108 of 100: held
    with django_capture_on_commit_callbacks(execute=True):
        saved = budget(team_a, platform_admin, enforce=True)
    request_budget_extension(actor=team_a_admin, team=team_a, amount="10", reason="a run")
    url = f"/budgets/{saved.pk}/delete/"
    lead, admin = Client(), Client()
    lead.force_login(team_a_admin)
    admin.force_login(platform_admin)
    assert lead.get(url).status_code == 403
    assert lead.post(url, {"confirm": "yes"}).status_code == 403

    page = admin.get(url)
    effects = page.content.decode()
    assert page.status_code == 200
    assert "The team&#x27;s held LocalQueues (team-a-work/train) admit new work again" in effects
    assert "no longer warned at 80 % and 100 % of the budget" in effects
    assert "Its extension goes with it (1 still waiting for a decision)." in effects
    assert admin.post(url).status_code == 200  # no confirmation: asked again, nothing done
    with pytest.raises(DomainError) as refused:
        delete_budget(actor=platform_admin, budget=saved, source="web", confirmed=False)
    assert refused.value.code == "confirmation_needed"
    assert Budget.objects.filter(pk=saved.pk).exists() and hold(lq) == "Hold"
    assert not AuditEvent.objects.filter(event="budget.deleted").exists()

    with django_capture_on_commit_callbacks(execute=True):
        done = admin.post(url, {"confirm": "yes"})
    assert (done.status_code, done["Location"]) == (302, "/budgets/")
    assert not Budget.objects.filter(pk=saved.pk).exists() and hold(lq) == "None"
    removed = AuditEvent.objects.get(event="budget.deleted")
    assert removed.actor_name == platform_admin.username and removed.source == "web"
