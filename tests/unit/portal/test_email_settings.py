"""The SMTP server from the environment: every setting read (the password as a secret),
STARTTLS and TLS refused together at start, and a notification e-mail that reaches a real
SMTP listener with the configured sign-in (and fails, kept on the subscription, when the
server does not answer)."""

from __future__ import annotations

import base64
import os
import socket
import socketserver
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from portal.notifications.payloads import message_for
from portal.notifications.send import deliver_task
from portal.notifications.subscriptions import create_subscription

ROOT = Path(__file__).resolve().parents[3]
SHOW = (
    "import portal.settings.production as s; print(repr((s.EMAIL_HOST, s.EMAIL_PORT, "
    "s.EMAIL_HOST_USER, s.EMAIL_HOST_PASSWORD, s.EMAIL_USE_TLS, s.EMAIL_USE_SSL, "
    "s.EMAIL_TIMEOUT)))"
)


def production(**env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("EMAIL_")}
    return subprocess.run(
        [sys.executable, "-c", SHOW],
        cwd=ROOT,
        env={**clean, "SECRET_KEY": "x" * 50, **env},
        capture_output=True,
        text=True,
        check=False,
    )


def test_production_reads_the_smtp_server_from_the_environment(tmp_path: Path) -> None:
    secret = tmp_path / "password"
    secret.write_text("s3cret\n")
    answer = production(
        EMAIL_HOST="smtp.example.org",
        EMAIL_PORT="587",
        EMAIL_HOST_USER="portal",
        EMAIL_HOST_PASSWORD_FILE=str(secret),
        EMAIL_USE_TLS="true",
        EMAIL_TIMEOUT="4",
    )
    assert answer.returncode == 0, answer.stderr
    assert answer.stdout.strip() == repr(
        ("smtp.example.org", 587, "portal", "s3cret", True, False, 4)
    )


def test_without_the_environment_a_dead_server_cannot_hold_a_worker() -> None:
    answer = production()
    assert answer.returncode == 0, answer.stderr
    assert answer.stdout.strip() == repr(("localhost", 25, "", "", False, False, 10))


def test_starttls_and_tls_together_stop_the_start_saying_why() -> None:
    answer = production(EMAIL_USE_TLS="true", EMAIL_USE_SSL="true")
    assert answer.returncode != 0
    assert "EMAIL_USE_TLS and EMAIL_USE_SSL are both set: choose one" in answer.stderr


# ----------------------------------------------------------------------------- a real SMTP


class Sink(socketserver.ThreadingTCPServer):
    """A minimal SMTP server (RFC 5321 with AUTH PLAIN) that keeps what it was given."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), SinkHandler)
        self.mails: list[dict[str, Any]] = []
        self.logins: list[str] = []


class SinkHandler(socketserver.StreamRequestHandler):
    server: Sink

    def say(self, line: str) -> None:
        self.wfile.write(line.encode() + b"\r\n")

    def handle(self) -> None:
        self.say("220 sink ESMTP")
        mail: dict[str, Any] = {"to": []}
        while line := self.rfile.readline().decode().rstrip("\r\n"):
            verb = line.split(" ", 1)[0].upper()
            if verb == "EHLO":
                self.say("250-sink")
                self.say("250 AUTH PLAIN")
            elif verb == "AUTH":
                _, user, password = base64.b64decode(line.split()[2]).decode().split("\0")
                self.server.logins.append(f"{user}:{password}")
                self.say("235 2.7.0 Authentication successful")
            elif verb == "MAIL":
                mail = {"from": line[10:], "to": []}
                self.say("250 OK")
            elif verb == "RCPT":
                mail["to"].append(line[8:])
                self.say("250 OK")
            elif verb == "DATA":
                self.say("354 End data with <CR><LF>.<CR><LF>")
                body = []
                while (data := self.rfile.readline().decode()) not in (".\r\n", ""):
                    body.append(data)
                mail["data"] = "".join(body)
                self.server.mails.append(mail)
                self.say("250 OK queued")
            elif verb == "QUIT":
                self.say("221 Bye")
                return
            else:
                self.say("250 OK")


@pytest.fixture
def smtp(settings: Any) -> Any:
    sink = Sink()
    threading.Thread(target=sink.serve_forever, daemon=True).start()
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT = sink.server_address[:2]
    settings.EMAIL_HOST_USER, settings.EMAIL_HOST_PASSWORD = "portal", "s3cret"
    yield sink
    sink.shutdown()
    sink.server_close()


PAYLOAD = {"id": 7, "team": "team-a", "resource": "requests.nvidia.com/gpu", "requested": "24"}


@pytest.mark.django_db
def test_a_notification_e_mail_reaches_the_smtp_server(
    smtp: Sink, team_a_admin: Any, team_a: Any
) -> None:
    sub = create_subscription(
        user=team_a_admin, team=team_a, kinds=["request"], channel="email", target="a@example.org"
    )
    message = message_for("quota_change.requested", "Quota request #7", PAYLOAD, "https://x.org")
    deliver_task(sub.pk, message.as_json())
    assert smtp.logins == ["portal:s3cret"]
    (mail,) = smtp.mails
    assert mail["to"] == ["<a@example.org>"]
    assert "Subject: Quota request #7" in mail["data"]
    assert "Asked for: 24" in mail["data"]
    sub.refresh_from_db()
    assert (sub.last_error, sub.last_sent_at is not None) == ("", True)


@pytest.mark.django_db
def test_a_server_that_does_not_answer_fails_the_send_kept_on_the_subscription(
    settings: Any, team_a_admin: Any, team_a: Any
) -> None:
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen()  # takes the connection, never says a word
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT = silent.getsockname()[:2]
    settings.EMAIL_TIMEOUT = 1
    sub = create_subscription(
        user=team_a_admin, team=team_a, kinds=["request"], channel="email", target="a@example.org"
    )
    message = message_for("quota_change.requested", "Quota request #7", PAYLOAD, "https://x.org")
    try:
        with pytest.raises(Exception, match="mail server"):  # called directly, the retry raises
            deliver_task(sub.pk, message.as_json())
    finally:
        silent.close()
    sub.refresh_from_db()
    # Only the timeout ends the wait for a greeting that never comes (smtplib reports it as
    # a lost connection).
    assert sub.last_error == "The mail server did not take it (SMTPServerDisconnected)."
