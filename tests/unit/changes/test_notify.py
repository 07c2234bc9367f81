"""Notification hooks: a generic webhook (a real local HTTP server) and e-mail."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core import mail

from changes.models import MigChangeRequest
from changes.notify import notify
from portal.infra import outbox
from portal.models import Notification
from portal.notifications.send import mail_task, notify_task
from tenants.models import Team
from tests.factories import MigChangeRequestFactory

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _sent_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """The notification task runs in this process instead of a worker (and at once, not
    when the test's transaction would have committed)."""
    tasks = {notify_task.name: notify_task, mail_task.name: mail_task}

    def run(task: str, *args: Any, once: bool = False) -> None:
        tasks[task](*args)

    monkeypatch.setattr(outbox, "send_later", run)


@pytest.fixture
def change(db: Any) -> MigChangeRequest:
    user = User.objects.create(username="lead")
    team = Team.objects.create(slug="team-a", name="A")
    return MigChangeRequestFactory(
        team=team,
        requested_by=user,
        nodes=["gpu-a100-03"],
        target_config="all-3g.40gb",
        reason="back to training",
        state="pending",
        verdict="needs_drain",
    )


def test_webhook_receives_the_event(settings: Any, change: MigChangeRequest) -> None:
    received: list[dict[str, Any]] = []

    class Hook(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            received.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Hook)
    threading.Thread(target=server.handle_request, daemon=True).start()
    settings.QM_EGRESS_ALLOWED_NETWORKS = ["127.0.0.0/8"]
    settings.QM_NOTIFY_WEBHOOK_URL = f"http://127.0.0.1:{server.server_address[1]}/hook"
    settings.QM_NOTIFY_EMAILS = []
    notify("requested", change)
    server.server_close()
    assert received == [
        {
            "event": "mig_change.requested",
            "id": change.pk,
            "kind": "mig",
            "state": "pending",
            "team": "team-a",
            "nodes": ["gpu-a100-03"],
            "pool": None,
            "target_config": "all-3g.40gb",
            "verdict": "needs_drain",
            "reason": "back to training",
            "failure": "",
            "requested_by": "lead",
            "decided_by": None,
            "teams_hit": [],
            "evictions": [],
            "impact": [],
        }
    ]


def test_email_goes_to_the_configured_addresses(settings: Any, change: MigChangeRequest) -> None:
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    settings.QM_NOTIFY_WEBHOOK_URL = ""
    settings.QM_NOTIFY_EMAILS = ["platform@example.com"]
    notify("failed", change)
    assert [m.subject for m in mail.outbox] == [f"MIG change #{change.pk} failed"]
    assert mail.outbox[0].to == ["platform@example.com"]


def test_the_members_of_a_team_the_change_hits_are_told_by_mail(
    settings: Any, change: MigChangeRequest
) -> None:
    from tenants.models import Membership, Namespace

    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    settings.QM_NOTIFY_WEBHOOK_URL, settings.QM_NOTIFY_EMAILS = "", []
    settings.QM_PUBLIC_URL = "https://gpu.example.org"
    team_b = Team.objects.create(slug="team-b", name="B")
    Namespace.objects.create(name="team-b", team=team_b)
    for name, email in (("lead-b", "lead-b@example.org"), ("quiet-b", "")):
        Membership.objects.create(
            team=team_b, user=User.objects.create(username=name, email=email), role="lead"
        )
    change.assessment = {
        "evictions": [
            {"namespace": "team-b", "pod": "dev-test-1g", "node": "gpu-a100-03", "team": "team-b"},
            {"namespace": "team-c", "pod": "other", "node": "gpu-a100-03", "team": "team-c"},
        ],
        "reasons": ["2 GPU pods of team-b, team-c must be evicted first."],
    }
    change.save()
    change.teams_hit.set([team_b, change.team])
    notify("approved", change)
    assert [m.to for m in mail.outbox] == [["lead-b@example.org"]]  # the asker has no address
    text = mail.outbox[0].body
    assert mail.outbox[0].subject == f"MIG change #{change.pk} approved"
    assert "Pods it evicts: team-b/dev-test-1g on gpu-a100-03" in text
    assert "team-c/other" not in text  # another team's pod is not named to team-b
    assert "another team's pod on gpu-a100-03" in text
    assert "Impact: 2 GPU pods of team-b, team-c must be evicted first." in text
    assert f"https://gpu.example.org/changes/{change.pk}/" in text
    # in the portal too: lead-b, quiet-b (no address) and the asker, once each
    assert sorted(Notification.objects.values_list("user__username", flat=True)) == [
        "lead",
        "lead-b",
        "quiet-b",
    ]


def test_nobody_is_told_by_default_when_the_installation_turned_it_off(
    settings: Any, change: MigChangeRequest
) -> None:
    settings.QM_NOTIFY_TEAMS = False
    notify("approved", change)
    assert not Notification.objects.exists()
