"""One decision table per request kind: the page and the API do a verb through the same
service, and each does it exactly when the permission the table names offers it (the
button a page shows), for every verb and every kind of user, over one fixture."""

from __future__ import annotations

from collections.abc import Callable
from itertools import count

import pytest
from django.contrib.auth.models import User
from django.test import Client

from changes.approval import quota_request_actions
from changes.decisions import QUOTA_VERBS
from changes.models import QuotaChangeRequest
from changes.quota import shown_fingerprint
from tests.factories import demo_quota_request

pytestmark = pytest.mark.django_db
USERS = ("lead-a", "approver", "admin", "member-a")
VALUES = count(17)


def pending_request() -> QuotaChangeRequest:
    """A new pending request of lead-a's (another value each time)."""
    return demo_quota_request(requested=str(next(VALUES)))


def by_page(client: Client, request: QuotaChangeRequest, verb: str) -> None:
    client.post(
        f"/quota/{request.pk}/{verb}/",
        {"comment": "read it", "fingerprint": shown_fingerprint(request)},
    )


def by_api(client: Client, request: QuotaChangeRequest, verb: str) -> None:
    client.post(
        f"/api/v1/quota-requests/{request.pk}/{verb}/",
        {"comment": "read it", "fingerprint": shown_fingerprint(request)},
        content_type="application/json",
    )


@pytest.mark.parametrize("caller", [by_page, by_api], ids=["page", "api"])
def test_each_quota_verb_is_done_exactly_when_its_permission_offers_it(
    demo: None, caller: Callable[[Client, QuotaChangeRequest, str], None]
) -> None:
    wrong = []
    for verb, table in QUOTA_VERBS.items():
        for username in USERS:
            user = User.objects.get(username=username)
            request = pending_request()
            offered = getattr(quota_request_actions(user, request), table.allowed)
            client = Client()
            client.force_login(user)
            caller(client, request, verb)
            request.refresh_from_db()
            done = request.state != QuotaChangeRequest.State.PENDING
            if done != offered:
                wrong.append((verb, username, offered, done))
            if not done:  # out of the next request's way
                QuotaChangeRequest.objects.filter(pk=request.pk).update(state="cancelled")
    assert wrong == []


def test_an_unknown_verb_is_refused_by_both(demo: None) -> None:
    request = pending_request()
    client = Client()
    client.force_login(User.objects.get(username="approver"))
    assert client.post(f"/quota/{request.pk}/expedite/").status_code == 403
    assert client.post(f"/api/v1/quota-requests/{request.pk}/expedite/").status_code == 404
