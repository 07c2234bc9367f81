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
from portal.notify import notify_task
from tenants.models import Team
from tests.factories import MigChangeRequestFactory

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _sent_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """The notification task runs in this process instead of a worker."""
    monkeypatch.setattr(notify_task, "delay", lambda *args: notify_task(*args))


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
            "target_config": "all-3g.40gb",
            "verdict": "needs_drain",
            "reason": "back to training",
            "failure": "",
            "requested_by": "lead",
            "decided_by": None,
        }
    ]


def test_email_goes_to_the_configured_addresses(settings: Any, change: MigChangeRequest) -> None:
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    settings.QM_NOTIFY_WEBHOOK_URL = ""
    settings.QM_NOTIFY_EMAILS = ["platform@example.com"]
    notify("failed", change)
    assert [m.subject for m in mail.outbox] == [f"MIG change #{change.pk} failed"]
    assert mail.outbox[0].to == ["platform@example.com"]
