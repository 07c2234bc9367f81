"""People's notification subscriptions (scope, validation, secrets, audit), who an event
reaches, the in-portal list with its count in the navigation, and the sends' failures."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from changes.models import MigChangeStep
from changes.notify import evicted_by_team, notify
from cluster.models import Cluster
from cluster.scope import settings_cluster, settings_cluster_id
from portal.models import AuditEvent, Notification, NotificationSubscription, OutboxMessage
from portal.notifications.payloads import message_for
from portal.notifications.send import Audience, deliver_task, notify_event
from portal.notifications.subscriptions import create_subscription, mask, subscribers
from tenants.models import Membership, Namespace
from tests.factories import MigChangeRequestFactory

pytestmark = pytest.mark.django_db

SLACK_URL = "https://hooks.slack.com/services/T0001/B0002/secretsecretsecret7IsoQ"
PAYLOAD = {"id": 7, "team": "team-a", "resource": "requests.nvidia.com/gpu", "requested": "24"}


def subscribe(user: Any, team: Any, **extra: Any) -> NotificationSubscription:
    fields = {"kinds": ["request"], "channel": "portal", "target": "", **extra}
    return create_subscription(user=user, team=team, **fields)


def errors_of(**call: Any) -> dict[str, list[str]]:
    with pytest.raises(ValidationError) as raised:
        create_subscription(**call)
    return raised.value.message_dict


# ----------------------------------------------------------------------------- scope


def test_a_lead_subscribes_for_their_team_and_the_change_is_audited_without_the_secret(
    team_a_admin: Any, team_a: Any
) -> None:
    sub = subscribe(
        team_a_admin, team_a, kinds=["decision", "request"], channel="slack", target=SLACK_URL
    )
    assert sub.kinds == ["request", "decision"]  # in the catalogue's order
    event = AuditEvent.objects.get(event="notification_subscription.created")
    assert event.team == team_a and event.actor == team_a_admin
    assert event.new == {
        "team": "team-a",
        "kinds": ["request", "decision"],
        "channel": "slack",
        "target": "https://hooks.slack.com/…IsoQ",
    }


def test_a_lead_cannot_follow_another_team_nor_every_team(team_a_admin: Any, team_b: Any) -> None:
    common = {"user": team_a_admin, "kinds": ["request"], "channel": "portal", "target": ""}
    assert errors_of(team=team_b, **common) == {
        "team": ["You lead no such team: a lead follows their own teams' events."]
    }
    assert errors_of(team=None, **common) == {
        "team": ["Choose one of your teams: only platform admins follow every team."]
    }


def test_a_member_who_leads_nothing_cannot_subscribe(team_a_member: Any, team_a: Any) -> None:
    assert errors_of(
        user=team_a_member, team=team_a, kinds=["request"], channel="portal", target=""
    ) == {"team": ["You lead no such team: a lead follows their own teams' events."]}


def test_a_platform_admin_follows_every_team(platform_admin: Any) -> None:
    sub = subscribe(platform_admin, None, kinds=["failed"])
    assert sub.team is None


# ----------------------------------------------------------------------------- validation


def test_each_field_says_what_is_wrong(settings: Any, team_a_admin: Any, team_a: Any) -> None:
    settings.QM_NOTIFY_HTTPS_ONLY = True
    assert errors_of(
        user=team_a_admin,
        team=team_a,
        kinds=[],
        channel="slack",
        target="http://hooks.example.org/x",
    ) == {
        "kinds": ["Choose at least one kind of event."],
        "target": ["An https:// URL: webhook URLs are secrets and travel encrypted only."],
    }
    assert errors_of(
        user=team_a_admin, team=team_a, kinds=["request", "weather"], channel="pager", target=""
    ) == {
        "kinds": [
            "Unknown kind: weather (one of request, decision, done, failed, expiring, evicted, "
            "budget, idle)."
        ],
        "channel": ["One of portal, email, slack, teams, webhook."],
    }
    assert errors_of(
        user=team_a_admin, team=team_a, kinds=["request"], channel="email", target="not-mail"
    ) == {"target": ["An e-mail address, e.g. gpu-team@example.org."]}
    assert errors_of(
        user=team_a_admin, team=team_a, kinds=["request"], channel="teams", target=""
    ) == {"target": ["The webhook URL the channel gave you."]}


def test_plain_http_is_allowed_outside_production(
    settings: Any, team_a_admin: Any, team_a: Any
) -> None:
    settings.QM_NOTIFY_HTTPS_ONLY = False
    settings.QM_EGRESS_ALLOWED_NETWORKS = ["127.0.0.0/8"]  # an operator's internal relay
    sub = subscribe(team_a_admin, team_a, channel="webhook", target="http://127.0.0.1:9/hook")
    assert sub.target == "http://127.0.0.1:9/hook"


def test_a_webhook_url_is_shown_as_its_host_and_last_characters() -> None:
    assert mask(SLACK_URL, "slack") == "https://hooks.slack.com/…IsoQ"
    assert mask("ops@example.org", "email") == "ops@example.org"


# ----------------------------------------------------------------------------- who is told


def test_an_event_reaches_its_team_lead_and_every_team_admins_once_each(
    team_a_admin: Any, team_a: Any, team_b: Any, platform_admin: Any
) -> None:
    subscribe(team_a_admin, team_a, channel="slack", target=SLACK_URL)
    subscribe(team_a_admin, team_a, channel="portal")
    subscribe(platform_admin, None)
    lead_b = Membership.objects.create(
        user=platform_admin.__class__.objects.create(username="lead-b"), team=team_b, role="lead"
    ).user
    subscribe(lead_b, team_b)
    notify_event(
        "quota_change.requested",
        "Quota request #7 (team-a): requested",
        PAYLOAD,
        cluster=settings_cluster_id(),
    )
    assert sorted(Notification.objects.values_list("user__username", "kind", "url")) == [
        ("alice", "request", "http://127.0.0.1:8000/quota/7/"),
        ("padmin", "request", "http://127.0.0.1:8000/quota/7/"),
    ]
    # one send for the Slack subscription, none for the portal-only ones
    outgoing = OutboxMessage.objects.filter(task="portal.notify.deliver_task")
    assert [m.args[0] for m in outgoing] == [
        NotificationSubscription.objects.get(channel="slack").pk
    ]
    assert SLACK_URL not in str(outgoing[0].args)


def test_a_lead_who_left_the_team_is_told_nothing(team_a_admin: Any, team_a: Any) -> None:
    subscribe(team_a_admin, team_a)
    Membership.objects.filter(user=team_a_admin).update(role="member")
    assert subscribers("request", "team-a") == []
    assert subscribers("decision", "team-a") == []


def test_events_of_no_kind_reach_no_subscriber(platform_admin: Any) -> None:
    subscribe(platform_admin, None, kinds=["request"])
    notify_event(
        "mig_change.weather", "Nothing", {"id": 1, "team": "team-a"}, cluster=settings_cluster_id()
    )
    assert not Notification.objects.exists()


def test_the_teams_whose_pods_a_change_evicted_are_told(
    team_a_admin: Any, team_a: Any, team_b: Any
) -> None:
    lead_b = Membership.objects.create(
        user=team_a_admin.__class__.objects.create(username="lead-b"), team=team_b, role="lead"
    ).user
    subscribe(lead_b, team_b, kinds=["evicted"])
    Namespace.objects.create(name="team-b-train", team=team_b)
    change = MigChangeRequestFactory(team=team_a, requested_by=team_a_admin, nodes=["gpu-1"])
    MigChangeStep.objects.create(
        request=change,
        node="gpu-1",
        step="evict",
        pods=["team-b-train/job-1", "other/x"],
        started_at=timezone.now(),
    )
    notify("succeeded", change)
    note = Notification.objects.get(user=lead_b)  # subscribed and told by default: once
    assert (note.user, note.kind, note.title) == (
        lead_b,
        "evicted",
        f"MIG change #{change.pk} evicted 1 pod of team team-b",
    )
    assert "Pods: team-b-train/job-1" in note.text
    # the asker hears of the end, without subscribing
    assert list(Notification.objects.filter(user=team_a_admin).values_list("title", flat=True)) == [
        f"MIG change #{change.pk} succeeded"
    ]


def test_an_evicted_pod_is_its_namespaces_team_on_the_changes_cluster(
    team_a_admin: Any, team_a: Any, team_b: Any
) -> None:
    """A namespace name belongs to a team on one cluster: the same name on another cluster
    may be another team's, and a name that is only elsewhere is no one's here."""
    here = settings_cluster()
    there = Cluster.objects.create(name="other", display_name="Other", connection="token")
    Namespace.objects.create(name="shared", team=team_b, cluster=there)
    Namespace.objects.create(name="shared", team=team_a, cluster=here)
    Namespace.objects.create(name="only-here", team=team_a, cluster=here)
    change = MigChangeRequestFactory(
        team=team_a, requested_by=team_a_admin, nodes=["gpu-1"], cluster=there
    )
    MigChangeStep.objects.create(
        request=change,
        node="gpu-1",
        step="evict",
        pods=["shared/job-1", "only-here/job-2"],
        started_at=timezone.now(),
    )
    assert evicted_by_team(change) == {"team-b": ["shared/job-1"]}


def test_a_person_subscribed_by_e_mail_gets_that_mail_and_not_the_default_one_too(
    team_a_admin: Any, team_a: Any, team_b: Any
) -> None:
    user_model = team_a_admin.__class__
    lead_b = user_model.objects.create(username="lead-b", email="lead-b@example.com")
    Membership.objects.create(user=lead_b, team=team_b, role="lead")
    other_b = user_model.objects.create(username="other-b", email="other-b@example.com")
    Membership.objects.create(user=other_b, team=team_b, role="member")
    subscribe(lead_b, team_b, kinds=["evicted"], channel="email")
    Namespace.objects.create(name="team-b-train", team=team_b)
    change = MigChangeRequestFactory(team=team_a, requested_by=team_a_admin, nodes=["gpu-1"])
    MigChangeStep.objects.create(
        request=change,
        node="gpu-1",
        step="evict",
        pods=["team-b-train/job-1"],
        started_at=timezone.now(),
    )
    OutboxMessage.objects.all().delete()
    notify_event(
        "mig_change.pods_evicted",
        f"MIG change #{change.pk} evicted 1 pod of team team-b",
        {"change_id": change.pk, "team": "team-b", "pods": ["team-b-train/job-1"]},
        Audience.of(teams=["team-b"]),
        cluster=change.cluster_id,
    )
    assert sorted(Notification.objects.values_list("user__username", flat=True)) == [
        "lead-b",
        "other-b",
    ]
    sent = sorted(
        (row.task, row.args[-1] if row.task.endswith("mail_task") else row.args[0])
        for row in OutboxMessage.objects.all()
    )
    subscription = NotificationSubscription.objects.get(user=lead_b).pk
    assert sent == [
        ("portal.notify.deliver_task", subscription),  # lead-b: their subscription's mail
        ("portal.notify.mail_task", ["other-b@example.com"]),  # other-b: the default one
    ]


# ----------------------------------------------------------------------------- sending


def answering(status: int, said: bytes = b"no_team") -> tuple[HTTPServer, str]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["Content-Length"]))
            self.send_response(status)
            self.end_headers()
            self.wfile.write(said)

        def log_message(self, *args: Any) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.handle_request, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/hook"


def test_a_refused_send_is_kept_on_the_subscription_and_not_retried(
    settings: Any, team_a_admin: Any, team_a: Any
) -> None:
    settings.QM_EGRESS_ALLOWED_NETWORKS = ["127.0.0.0/8"]
    server, url = answering(404)
    sub = subscribe(team_a_admin, team_a, channel="slack", target=url)
    message = message_for("quota_change.requested", "Quota #7", PAYLOAD, "https://x.org")
    deliver_task(sub.pk, message.as_json())  # returns: a 404 will not get better
    server.server_close()
    sub.refresh_from_db()
    assert (sub.last_error, sub.last_sent_at) == ("HTTP 404", None)  # never what it said


def test_a_busy_endpoint_is_tried_again(settings: Any, team_a_admin: Any, team_a: Any) -> None:
    settings.QM_EGRESS_ALLOWED_NETWORKS = ["127.0.0.0/8"]
    server, url = answering(503)
    sub = subscribe(team_a_admin, team_a, channel="teams", target=url)
    message = message_for("quota_change.requested", "Quota #7", PAYLOAD, "https://x.org")
    with pytest.raises(Exception, match="HTTP 503"):  # called directly, the retry raises
        deliver_task(sub.pk, message.as_json())
    server.server_close()
    sub.refresh_from_db()
    assert sub.last_error == "HTTP 503"


# ----------------------------------------------------------------------------- pages


def test_the_settings_page_shows_field_errors_and_never_the_whole_url(
    client: Client, settings: Any, team_a_admin: Any, team_a: Any, team_b: Any
) -> None:
    settings.QM_NOTIFY_HTTPS_ONLY = True
    client.force_login(team_a_admin)
    answer = client.post(
        "/notifications/settings/",
        {"team": "team-a", "channel": "slack", "target": "http://hooks.example.org/x"},
    )
    assert answer.status_code == 422
    page = answer.content.decode()
    assert 'id="id_kinds-error">Choose at least one kind of event.</p>' in page
    assert (
        'id="id_target-error">An https:// URL: webhook URLs are secrets and travel '
        "encrypted only.</p>" in page
    )
    assert "hooks.example.org/x" not in page  # a refused secret is not echoed either
    answer = client.post(
        "/notifications/settings/", {"team": "team-b", "kinds": ["request"], "channel": "portal"}
    )
    assert answer.status_code == 422
    assert "You lead no such team" in answer.content.decode()
    answer = client.post(
        "/notifications/settings/",
        {"team": "team-a", "kinds": ["request", "failed"], "channel": "slack", "target": SLACK_URL},
    )
    assert answer.status_code == 302
    page = client.get("/notifications/settings/").content.decode()
    assert "<code>https://hooks.slack.com/…IsoQ</code>" in page
    assert "secretsecret" not in page
    assert "New request, Change failed or aborted" in page


def test_subscriptions_are_removed_by_their_owner_only(
    client: Client, team_a_admin: Any, team_a: Any, platform_admin: Any
) -> None:
    theirs = subscribe(platform_admin, None)
    client.force_login(team_a_admin)
    answer = client.post("/notifications/settings/", {"delete": str(theirs.pk)})
    assert answer.status_code == 404
    mine = subscribe(team_a_admin, team_a)
    assert client.post("/notifications/settings/", {"delete": str(mine.pk)}).status_code == 302
    assert list(NotificationSubscription.objects.all()) == [theirs]
    assert AuditEvent.objects.filter(event="notification_subscription.deleted").count() == 1


def test_anyone_turns_their_default_notifications_off_and_on_again_audited(
    client: Client, team_a_member: Any, team_a: Any
) -> None:
    client.force_login(team_a_member)  # a member who leads nothing: no subscription
    page = client.get("/notifications/settings/").content.decode()
    assert "These notifications are <strong>on</strong>." in page
    assert client.post("/notifications/settings/", {"told_by_default": "off"}).status_code == 302
    page = client.get("/notifications/settings/").content.decode()
    assert "These notifications are <strong>off</strong>" in page
    client.post("/notifications/settings/", {"told_by_default": "off"})  # already off
    client.post("/notifications/settings/", {"told_by_default": "on"})
    changed = AuditEvent.objects.filter(event="notification_preference.changed").order_by("id")
    assert [(e.actor_id, e.old, e.new) for e in changed] == [
        (team_a_member.pk, {"told_by_default": True}, {"told_by_default": False}),
        (team_a_member.pk, {"told_by_default": False}, {"told_by_default": True}),
    ]


def test_the_settings_page_needs_the_csrf_token(team_a_admin: Any, team_a: Any) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(team_a_admin)
    answer = client.post(
        "/notifications/settings/", {"team": "team-a", "kinds": ["request"], "channel": "portal"}
    )
    assert answer.status_code == 403
    assert not NotificationSubscription.objects.exists()


def notes(user: Any, count: int, start: int = 0) -> None:
    Notification.objects.bulk_create(
        Notification(
            user=user,
            event="quota_change.requested",
            kind="request",
            title=f"Quota request #{i} (team-a): requested",
            url=f"/quota/{i}/",
            team="team-a",
        )
        for i in range(start, start + count)
    )


def queries(client: Client, path: str) -> tuple[int, str]:
    with CaptureQueriesContext(connection) as captured:
        answer = client.get(path)
    assert answer.status_code == 200
    return len(captured), answer.content.decode()


def test_the_list_shows_the_latest_and_the_navigation_counts_the_unread(
    client: Client, team_a_admin: Any
) -> None:
    client.force_login(team_a_admin)
    notes(team_a_admin, 3)
    small, page = queries(client, "/notifications/")
    assert '<span class="badge">3</span>' in page
    assert "Quota request #2 (team-a): requested" in page
    notes(team_a_admin, 120, start=3)
    large, page = queries(client, "/notifications/")
    assert large == small
    assert '<span class="badge">123</span>' in page
    assert "Quota request #122 (team-a): requested" in page
    assert "Quota request #72 (team-a): requested" not in page  # the latest 50 only
    home_small, _ = queries(client, "/tokens/")
    notes(team_a_admin, 100, start=200)
    home_large, page = queries(client, "/tokens/")
    assert home_large == home_small and '<span class="badge">223</span>' in page


def test_reading_marks_one_or_all_and_another_users_item_is_left_alone(
    client: Client, team_a_admin: Any, platform_admin: Any
) -> None:
    notes(team_a_admin, 2)
    notes(platform_admin, 1)
    first = Notification.objects.filter(user=team_a_admin).order_by("pk").first()
    assert first is not None
    client.force_login(team_a_admin)
    client.post("/notifications/", {"read": str(first.pk)})
    theirs = Notification.objects.get(user=platform_admin)
    client.post("/notifications/", {"read": str(theirs.pk)})
    assert list(
        Notification.objects.filter(read_at__isnull=False).values_list("pk", flat=True)
    ) == [first.pk]
    client.post("/notifications/", {"read": "all"})
    assert Notification.objects.filter(user=team_a_admin, read_at=None).count() == 0
    assert Notification.objects.filter(user=platform_admin, read_at=None).count() == 1
    page = client.get("/notifications/").content.decode()
    assert 'class="badge"' not in page


def test_a_teams_connector_that_says_it_throttles_is_tried_again(
    settings: Any, team_a_admin: Any, team_a: Any
) -> None:
    settings.QM_EGRESS_ALLOWED_NETWORKS = ["127.0.0.0/8"]
    server, url = answering(200, b"Microsoft Teams endpoint returned HTTP error 429 ...")
    sub = subscribe(team_a_admin, team_a, channel="teams", target=url)
    message = message_for("quota_change.requested", "Quota #7", PAYLOAD, "https://x.org")
    with pytest.raises(Exception, match="throttled"):
        deliver_task(sub.pk, message.as_json())
    server.server_close()
    sub.refresh_from_db()
    assert sub.last_sent_at is None
    assert sub.last_error == "throttled: the endpoint said HTTP 429"
