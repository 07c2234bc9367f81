"""The egress rule for webhooks a user chooses (portal/infra/egress.py): every address
class that leads inward is refused when a subscription is saved (API and page) and again
when it is sent, a real loopback listener proves nothing reaches it (redirects included),
the checked address is the one connected to, and what is kept of a failure is a short
sentence, never the answer's body."""

from __future__ import annotations

import contextlib
import ipaddress
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from django.test import Client

from portal.infra import egress
from portal.models import NotificationSubscription
from portal.notifications.payloads import message_for
from portal.notifications.send import deliver_task
from portal.notifications.subscriptions import create_subscription

pytestmark = pytest.mark.django_db

PAYLOAD = {"id": 7, "team": "team-a", "resource": "requests.nvidia.com/gpu", "requested": "24"}
REBOUND = "hooks.rebound.example"  # a name whose DNS answers a loopback address


class Listener:
    """An HTTP server on a loopback port that records every request it gets and answers
    with ``status`` (and ``headers``, ``body``)."""

    def __init__(
        self, status: int = 200, headers: dict[str, str] | None = None, body: bytes = b""
    ) -> None:
        self.requests: list[tuple[str, str, dict[str, str]]] = []
        listener = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                self.rfile.read(length)
                listener.requests.append((self.command, self.path, dict(self.headers)))
                self.send_response(status)
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = _answer

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def listener() -> Iterator[Listener]:
    server = Listener(body=b"INTERNAL-ONLY-DATA")
    yield server
    server.close()


@pytest.fixture
def rebound(monkeypatch: pytest.MonkeyPatch) -> None:
    """DNS at the edge: ``REBOUND`` resolves to loopback, every other name as usual."""
    real = egress.resolve
    monkeypatch.setattr(
        egress,
        "resolve",
        lambda host, port: ["127.0.0.1"] if host == REBOUND else real(host, port),
    )


def inward_urls(port: int) -> list[str]:
    return [
        f"http://127.0.0.1:{port}/hook",
        f"http://localhost:{port}/hook",
        f"http://[::1]:{port}/hook",
        f"http://0.0.0.0:{port}/hook",
        "http://169.254.169.254/latest/meta-data/",
        "http://10.0.0.1/hook",
        "http://[fc00::1]/hook",
        "http://224.0.0.1/hook",
        "http://240.0.0.1/hook",
        "http://100.100.100.200/latest/meta-data/",
        "http://[::ffff:127.0.0.1]/hook",
        f"http://{REBOUND}:{port}/hook",
        "http://metadata.google.internal/computeMetadata/v1/",
        "https://10.0.0.1/hook",
        "https://169.254.169.254/",
    ]


def send(sub: NotificationSubscription) -> None:
    message = message_for("quota_change.requested", "Quota #7", PAYLOAD, "https://x.org")
    with contextlib.suppress(Exception):  # called directly, a retry raises
        deliver_task(sub.pk, message.as_json())


def test_every_inward_address_class_is_refused_over_the_api(
    client: Client, team_a_admin: Any, team_a: Any, listener: Listener, rebound: None
) -> None:
    client.force_login(team_a_admin)
    for url in inward_urls(listener.port):
        answer = client.post(
            "/api/v1/notification-subscriptions/",
            {"team": "team-a", "kinds": ["request"], "channel": "webhook", "target": url},
            content_type="application/json",
        )
        assert (answer.status_code, answer.json().get("errors")) == (
            400,
            {"target": [egress.NOT_PUBLIC]},
        ), url
    assert not NotificationSubscription.objects.exists()
    assert listener.requests == []


def test_the_settings_page_refuses_an_inward_address_with_a_field_error(
    client: Client, team_a_admin: Any, team_a: Any, rebound: None
) -> None:
    client.force_login(team_a_admin)
    for url in ("http://169.254.169.254/latest/meta-data/", f"http://{REBOUND}/hook"):
        answer = client.post(
            "/notifications/settings/",
            {"team": "team-a", "kinds": ["request"], "channel": "slack", "target": url},
        )
        assert answer.status_code == 422
        assert 'id="id_target-error">Not a public address' in answer.content.decode()
    assert not NotificationSubscription.objects.exists()


def test_subscriptions_saved_before_the_rule_are_refused_when_sent(
    team_a_admin: Any, team_a: Any, listener: Listener, rebound: None
) -> None:
    for url in inward_urls(listener.port):
        sub = NotificationSubscription.objects.create(
            user=team_a_admin, team=team_a, kinds=["request"], channel="webhook", target=url
        )
        send(sub)
        sub.refresh_from_db()
        assert (sub.last_error, sub.last_sent_at) == ("refused: " + egress.NOT_PUBLIC, None), url
    assert listener.requests == []


def test_a_name_that_turns_inward_after_it_was_saved_is_refused_when_sent(
    monkeypatch: pytest.MonkeyPatch, team_a_admin: Any, team_a: Any, listener: Listener
) -> None:
    answers = {"hooks.flip.example": ["93.184.215.14"]}  # public when saved
    monkeypatch.setattr(egress, "resolve", lambda host, port: answers[host])
    sub = create_subscription(
        user=team_a_admin,
        team=team_a,
        kinds=["request"],
        channel="webhook",
        target=f"http://hooks.flip.example:{listener.port}/hook",
    )
    answers["hooks.flip.example"] = ["93.184.215.14", "127.0.0.1"]  # one inward answer is enough
    send(sub)
    sub.refresh_from_db()
    assert sub.last_error == "refused: " + egress.NOT_PUBLIC
    assert listener.requests == []


def test_the_checked_address_is_the_one_connected_to(
    settings: Any, monkeypatch: pytest.MonkeyPatch, team_a_admin: Any, team_a: Any
) -> None:
    """An operator allowed loopback; the name is known to the portal's check only (the
    system resolver has never heard of it), so the POST arriving proves the connection
    went to the checked address, with the name in the Host header."""
    settings.QM_EGRESS_ALLOWED_NETWORKS = ["127.0.0.0/8"]
    calls: list[str] = []
    monkeypatch.setattr(egress, "resolve", lambda host, port: calls.append(host) or ["127.0.0.1"])
    server = Listener(status=204)
    try:
        sub = create_subscription(
            user=team_a_admin,
            team=team_a,
            kinds=["request"],
            channel="webhook",
            target=f"http://hooks.pinned.example:{server.port}/hook",
        )
        send(sub)
    finally:
        server.close()
    sub.refresh_from_db()
    assert (sub.last_error, sub.last_sent_at is not None) == ("", True)
    assert [(method, path) for method, path, _ in server.requests] == [("POST", "/hook")]
    assert server.requests[0][2]["Host"] == f"hooks.pinned.example:{server.port}"
    assert calls == ["hooks.pinned.example", "hooks.pinned.example"]  # saved, then sent


def test_a_redirect_is_not_followed(settings: Any, team_a_admin: Any, team_a: Any) -> None:
    settings.QM_EGRESS_ALLOWED_NETWORKS = ["127.0.0.1/32"]  # the "public" hook only...
    inner = Listener(body=b"SECRET")  # ...redirecting to another loopback port
    outer = Listener(status=302, headers={"Location": f"http://127.0.0.1:{inner.port}/admin"})
    try:
        sub = create_subscription(
            user=team_a_admin,
            team=team_a,
            kinds=["request"],
            channel="webhook",
            target=f"http://127.0.0.1:{outer.port}/hook",
        )
        send(sub)
    finally:
        inner.close()
        outer.close()
    sub.refresh_from_db()
    assert sub.last_error == "HTTP 302: redirects are not followed"
    assert [method for method, _, _ in outer.requests] == ["POST"]
    assert inner.requests == []


def test_a_failure_keeps_a_short_sentence_and_never_the_answer(
    settings: Any, team_a_admin: Any, team_a: Any
) -> None:
    settings.QM_EGRESS_ALLOWED_NETWORKS = ["127.0.0.0/8"]
    server = Listener(status=500, body=b"INTERNAL-ONLY-DATA: the listener's secret")
    closed = Listener()
    closed.close()  # a port nobody listens on: refused, told like any other failure
    try:
        subs = [
            create_subscription(
                user=team_a_admin,
                team=team_a,
                kinds=["request"],
                channel="webhook",
                target=f"http://127.0.0.1:{port}/hook",
            )
            for port in (server.port, closed.port)
        ]
        for sub in subs:
            send(sub)
    finally:
        server.close()
    errors = [NotificationSubscription.objects.get(pk=sub.pk).last_error for sub in subs]
    assert errors == ["HTTP 500", "could not deliver: no connection"]


@pytest.mark.parametrize(
    ("address", "public"),
    [
        ("93.184.215.14", True),
        ("2606:2800:21f:cb07:6820:80da:af6b:8b2c", True),
        ("127.0.0.2", False),
        ("::1", False),
        ("0.0.0.0", False),
        ("::", False),
        ("169.254.169.254", False),
        ("fe80::1", False),
        ("10.0.0.1", False),
        ("172.16.0.1", False),
        ("192.168.1.1", False),
        ("fc00::1", False),
        ("fd00:ec2::254", False),
        ("224.0.0.1", False),
        ("ff02::1", False),
        ("240.0.0.1", False),
        ("255.255.255.255", False),
        ("100.64.0.1", False),
        ("::ffff:10.0.0.1", False),
        ("::127.0.0.1", False),
        ("2002:7f00:1::", False),
        ("64:ff9b::a00:1", False),
    ],
)
def test_which_addresses_are_public(address: str, public: bool) -> None:
    assert egress.is_public(ipaddress.ip_address(address)) is public
