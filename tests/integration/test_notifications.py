"""People's notifications end to end: a quota request asked in the portal reaches a team
lead's Slack hook and an admin's Teams hook (two local HTTP servers) through the outbox,
Redis and a real Celery worker; an endpoint that answers 503 is tried again."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
import redis
from django.contrib.auth.models import User

from changes.quota import request_quota_change
from demo.services import load_demo
from portal.models import Notification, NotificationSubscription, OutboxMessage
from portal.notifications.subscriptions import create_subscription
from tenants.models import Namespace, Team
from tests.support import Worker, wait_for

pytestmark = pytest.mark.django_db(transaction=True)


class Hook:
    """A webhook endpoint on a loopback port: the JSON bodies it received, and the status
    codes it answers with (the last one once the list runs out)."""

    def __init__(self, answers: tuple[int, ...] = (200,)) -> None:
        self.received: list[dict[str, Any]] = []
        self.answers = list(answers)
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                hook.received.append(
                    {"json": json.loads(body), "type": self.headers["Content-Type"]}
                )
                status = hook.answers.pop(0) if len(hook.answers) > 1 else hook.answers[0]
                self.send_response(status)
                self.end_headers()
                self.wfile.write(b"ok" if status == 200 else b"busy")

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def worker(settings: Any, demo_cluster: Any) -> Iterator[Worker]:
    """A real worker whose broker hands a task out again only after a minute: longer than
    the retries' countdowns, as in production (the shared fixture's 4 s, for the tests that
    kill a worker, would deliver a retry due in 5 s twice)."""
    settings.KUBE_URL = demo_cluster.url
    broker = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    broker.flushdb()
    settings.QM_EGRESS_ALLOWED_NETWORKS = ["127.0.0.0/8"]  # the hooks listen on loopback
    process = Worker(
        demo_cluster.url, CELERY_VISIBILITY_TIMEOUT="60", QM_EGRESS_ALLOWED_NETWORKS="127.0.0.0/8"
    )
    process.start()
    yield process
    process.stop()
    broker.flushdb()


@pytest.fixture
def hooks() -> Iterator[tuple[Hook, Hook]]:
    slack, teams = Hook(), Hook(answers=(503, 200))
    yield slack, teams
    slack.close()
    teams.close()


def test_a_request_reaches_slack_and_teams_through_the_outbox_and_the_worker(
    settings: Any, worker: Worker, hooks: tuple[Hook, Hook]
) -> None:
    slack, teams = hooks
    settings.QM_PUBLIC_URL = "https://gpu.example.org"
    load_demo()
    lead, admin = User.objects.get(username="lead-a"), User.objects.get(username="admin")
    team_a = Team.objects.get(slug="team-a")
    create_subscription(
        user=lead, team=team_a, kinds=["request"], channel="slack", target=slack.url
    )
    create_subscription(user=admin, team=None, kinds=["request"], channel="teams", target=teams.url)
    request = request_quota_change(
        actor=lead,
        team=team_a,
        kind="namespace",
        namespace=Namespace.objects.get(name="team-a"),
        resource="requests.nvidia.com/gpu",
        requested="24",
        reason="a deadline",
    )
    wait_for(lambda: slack.received and len(teams.received) == 2, what="both hooks", timeout=40)
    title = f"Quota request #{request.pk} (team-a): requested"
    assert slack.received[0]["type"] == "application/json"
    body = slack.received[0]["json"]
    assert body["text"] == title
    assert (
        body["blocks"][-1]["elements"][0]["url"] == f"https://gpu.example.org/quota/{request.pk}/"
    )
    # Teams answered 503 first: the same card again, after the backoff
    assert teams.received[0] == teams.received[1]
    card = teams.received[1]["json"]["attachments"][0]
    assert card["contentType"] == "application/vnd.microsoft.card.adaptive"
    assert card["content"]["body"][0]["text"] == title
    assert card["content"]["actions"][0]["type"] == "Action.OpenUrl"
    wait_for(
        lambda: NotificationSubscription.objects.filter(
            channel="teams", last_error="", last_sent_at__isnull=False
        ).exists(),
        what="the Teams send recorded",
    )
    assert sorted(Notification.objects.values_list("user__username", "title")) == [
        ("admin", title),
        ("lead-a", title),
    ]
    # the outbox carried the subscription's id, never its URL (a secret)
    sent = OutboxMessage.objects.filter(task="portal.notify.deliver_task")
    assert sent.count() == 2
    assert not any(slack.url in json.dumps(m.args) or teams.url in json.dumps(m.args) for m in sent)
