"""A quota item that is absent says what it means: a namespace without it has no limit (a
ClusterQueue without its nominal quota has 0 of its own), on the request's page, in the
approval that finds it changed and in the note of a grant's end."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone

from changes.quota import approve_quota_change, expire_quota_grants
from portal.vocabulary.errors import DomainError
from tenants.models import QuotaItem
from tests.factories import demo_fleet_nodes, demo_quota_request

pytestmark = pytest.mark.django_db

GPU = "requests.nvidia.com/gpu"


def approver() -> User:
    return User.objects.get(username="approver")


def no_gpu_item() -> None:
    QuotaItem.objects.filter(namespace__name="team-a", resource=GPU).delete()


def test_a_namespace_without_the_item_reads_no_limit_on_the_page_and_at_the_grants_end(
    client: Client, demo: Any
) -> None:
    demo_fleet_nodes()
    no_gpu_item()
    start = timezone.now()
    grant = demo_quota_request(requested="20", grant_until=start + dt.timedelta(days=2))
    assert grant.previous == ""
    client.force_login(approver())
    page = client.get(f"/quota/{grant.pk}/").content.decode()
    assert "Approve no limit → 20" in page
    assert "no limit → <strong>20</strong>" in page
    assert "(none)" not in page and "Approve none" not in page
    approve_quota_change(request_id=grant.pk, approver=approver(), comment="ok")
    assert expire_quota_grants(now=start + dt.timedelta(days=2, minutes=1)) == [grant.pk]
    grant.refresh_from_db()
    assert grant.end_note == "Its end took back +20: 20 → no limit."
    assert not QuotaItem.objects.filter(namespace__name="team-a", resource=GPU).exists()


def test_an_approval_that_finds_the_item_removed_says_no_limit(demo: Any) -> None:
    demo_fleet_nodes()
    request = demo_quota_request(requested="20")
    assert request.previous == "16"
    no_gpu_item()
    with pytest.raises(DomainError) as raised:
        approve_quota_change(
            request_id=request.pk,
            approver=approver(),
            comment="ok",
            seen=request.assessment["fingerprint"],
        )
    assert raised.value.message.startswith(
        "The quota is now no limit (it was 16 when this was asked): approving would change "
        "it no limit → 20."
    )
