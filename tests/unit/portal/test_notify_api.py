"""Notifications and subscriptions over the REST API: the pages' scope and field errors, in
the API's error format, and a webhook URL never given back in full."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from portal.models import AuditEvent, Notification, NotificationSubscription
from portal.notifications.subscriptions import create_subscription, is_told_by_default

pytestmark = pytest.mark.django_db

URL = "/api/v1/notification-subscriptions/"
SECRET = "https://outlook.example.org/webhookb2/0000-secret-part/IncomingWebhook/abcd9f3e"


def test_a_lead_subscribes_over_the_api_and_reads_back_a_masked_url(
    client: Client, team_a_admin: Any, team_a: Any
) -> None:
    client.force_login(team_a_admin)
    answer = client.post(
        URL,
        {"team": "team-a", "kinds": ["failed", "done"], "channel": "teams", "target": SECRET},
        content_type="application/json",
    )
    assert answer.status_code == 201, answer.json()
    body = answer.json()
    assert {k: body[k] for k in ("team", "kinds", "channel", "target")} == {
        "team": "team-a",
        "kinds": ["done", "failed"],
        "channel": "teams",
        "target": "https://outlook.example.org/…9f3e",
    }
    listed = client.get(URL)
    assert "secret-part" not in listed.content.decode()
    assert [row["id"] for row in listed.json()["results"]] == [body["id"]]


def test_field_errors_come_in_the_api_format(
    client: Client, settings: Any, team_a_admin: Any, team_b: Any
) -> None:
    settings.QM_NOTIFY_HTTPS_ONLY = True
    client.force_login(team_a_admin)
    answer = client.post(
        URL,
        {"team": "team-b", "kinds": ["request"], "channel": "slack", "target": SECRET},
        content_type="application/json",
    )
    assert (answer.status_code, answer.json()) == (
        400,
        {
            "detail": "Invalid input.",
            "code": "invalid",
            "errors": {"team": ["You lead no such team: a lead follows their own teams' events."]},
        },
    )
    answer = client.post(
        URL,
        {"team": "team-a", "kinds": [], "channel": "slack", "target": "http://x.example.org/h"},
        content_type="application/json",
    )
    assert answer.status_code == 400
    assert answer.json()["errors"] == {
        "kinds": ["Choose at least one kind of event."],
        "target": ["An https:// URL: webhook URLs are secrets and travel encrypted only."],
    }
    assert not NotificationSubscription.objects.exists()


def test_another_users_subscription_and_notification_are_not_found(
    client: Client, team_a_admin: Any, team_a: Any, platform_admin: Any
) -> None:
    theirs = create_subscription(
        user=platform_admin, team=None, kinds=["request"], channel="portal"
    )
    note = Notification.objects.create(user=platform_admin, event="e", kind="request", title="t")
    client.force_login(team_a_admin)
    assert client.delete(f"{URL}{theirs.pk}/").status_code == 404
    assert client.post(f"/api/v1/notifications/{note.pk}/read/").status_code == 404
    assert client.get("/api/v1/notifications/").json()["results"] == []
    mine = Notification.objects.create(user=team_a_admin, event="e", kind="request", title="t")
    answer = client.post(f"/api/v1/notifications/{mine.pk}/read/")
    assert answer.status_code == 200 and answer.json()["read_at"] is not None
    assert NotificationSubscription.objects.filter(pk=theirs.pk).exists()


PREFERENCE = "/api/v1/notification-preference/"


def test_anyone_reads_and_sets_their_default_notifications_over_the_api_audited(
    client: Client, team_a_member: Any, team_a_admin: Any, team_a: Any
) -> None:
    client.force_login(team_a_member)  # a member who leads nothing
    assert client.get(PREFERENCE).json() == {"told_by_default": True}
    answer = client.put(PREFERENCE, {"told_by_default": False}, content_type="application/json")
    assert (answer.status_code, answer.json()) == (200, {"told_by_default": False})
    assert client.get(PREFERENCE).json() == {"told_by_default": False}
    client.put(PREFERENCE, {"told_by_default": False}, content_type="application/json")  # again
    assert is_told_by_default(team_a_admin)  # someone else's is left alone
    changed = AuditEvent.objects.filter(event="notification_preference.changed")
    assert [(e.actor_id, e.source, e.old, e.new) for e in changed] == [
        (team_a_member.pk, "api", {"told_by_default": True}, {"told_by_default": False})
    ]


@pytest.mark.parametrize(
    "body",
    [{"told_by_default": "false"}, {"told_by_default": None}, {}, {"on": True}],
)
def test_a_preference_that_is_no_boolean_is_a_field_error(
    client: Client, team_a_member: Any, body: dict[str, Any]
) -> None:
    client.force_login(team_a_member)
    answer = client.put(PREFERENCE, body, content_type="application/json")
    assert answer.status_code == 400
    assert set(answer.json()["errors"]) <= {"told_by_default", "on"}
    assert client.get(PREFERENCE).json() == {"told_by_default": True}


def test_the_preference_needs_a_signed_in_caller(client: Client) -> None:
    assert client.get(PREFERENCE).status_code in (401, 403)
    answer = client.put(PREFERENCE, {"told_by_default": False}, content_type="application/json")
    assert answer.status_code in (401, 403)
