"""Sign-in throttling: per account and per address, said on the login page, lifted by the
cool-off or by an admin; the address behind an ingress is the one the ingress saw."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from axes.models import AccessAttempt
from django.core.management import call_command
from django.test import Client

pytestmark = pytest.mark.django_db

RIGHT = "quartermaster-demo"


def sign_in(client: Client, username: str, password: str, address: str = "10.0.0.1") -> Any:
    return client.post("/login/", {"username": username, "password": password}, REMOTE_ADDR=address)


@pytest.fixture
def limit(settings: Any) -> int:
    settings.AXES_FAILURE_LIMIT = 5
    return 5


def test_an_account_is_locked_after_the_limit_even_with_the_right_password(
    client: Client, demo: None, limit: int
) -> None:
    for attempt in range(limit):
        # each from another address: the account's own count locks it
        answer = sign_in(client, "lead-a", "wrong", address=f"10.0.1.{attempt}")
        assert answer.status_code in (200, 429)
    refused = sign_in(client, "lead-a", RIGHT, address="10.0.2.1")
    assert refused.status_code == 429
    page = refused.content.decode()
    assert "Too many failed sign-ins for this account or from this address" in page
    assert "Try again in 15 minutes" in page
    assert 'name="password"' in page  # the form stays, with what happened above it
    assert int(refused.headers["Retry-After"]) == 15 * 60
    assert "_auth_user_id" not in client.session
    # another account from yet another address is not touched
    assert sign_in(Client(), "lead-b", RIGHT, address="10.0.3.1").status_code == 302


def test_an_address_is_locked_for_every_account(client: Client, demo: None, limit: int) -> None:
    for attempt in range(limit):
        sign_in(client, f"nobody-{attempt}", "guess", address="10.9.9.9")
    assert sign_in(Client(), "lead-b", RIGHT, address="10.9.9.9").status_code == 429
    assert sign_in(Client(), "lead-b", RIGHT, address="10.9.9.10").status_code == 302


def test_the_cool_off_and_an_admin_lift_the_lock(client: Client, demo: None, limit: int) -> None:
    for _ in range(limit):
        sign_in(client, "lead-a", "wrong")
    assert sign_in(client, "lead-a", RIGHT).status_code == 429
    AccessAttempt.objects.update(attempt_time=dt.datetime.now(dt.UTC) - dt.timedelta(minutes=16))
    assert sign_in(Client(), "lead-a", RIGHT).status_code == 302

    for _ in range(limit):
        sign_in(client, "lead-a", "wrong")
    assert sign_in(client, "lead-a", RIGHT).status_code == 429
    call_command("axes_reset_username", "lead-a")
    call_command("axes_reset_ip", "10.0.0.1")
    assert sign_in(Client(), "lead-a", RIGHT).status_code == 302


def test_below_the_limit_the_right_password_works_and_clears_the_count(
    client: Client, demo: None, limit: int
) -> None:
    for _ in range(limit - 1):
        assert sign_in(client, "lead-a", "wrong").status_code == 200
    assert sign_in(client, "lead-a", RIGHT).status_code == 302
    assert not AccessAttempt.objects.filter(username="lead-a").exists()


def test_behind_an_ingress_the_address_is_the_one_it_appended(
    client: Client, demo: None, limit: int, settings: Any
) -> None:
    settings.QM_TRUSTED_PROXIES = 1
    ingress = "10.100.0.5"
    for attempt in range(limit):
        # the client makes up a new leftmost entry each time; the ingress appends the truth
        client.post(
            "/login/",
            {"username": f"nobody-{attempt}", "password": "guess"},
            REMOTE_ADDR=ingress,
            HTTP_X_FORWARDED_FOR=f"1.2.3.{attempt}, 203.0.113.7",
        )
    locked = Client().post(
        "/login/",
        {"username": "lead-b", "password": RIGHT},
        REMOTE_ADDR=ingress,
        HTTP_X_FORWARDED_FOR="203.0.113.7",
    )
    assert locked.status_code == 429
    other = Client().post(
        "/login/",
        {"username": "lead-b", "password": RIGHT},
        REMOTE_ADDR=ingress,
        HTTP_X_FORWARDED_FOR="198.51.100.20",
    )
    assert other.status_code == 302  # everyone else behind the same ingress signs in
