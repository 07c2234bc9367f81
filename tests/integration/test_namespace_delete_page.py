"""The admin's namespace delete asks for confirmation: it says what leaves the cluster and
what history stays, and deletes only when the name is typed on the version it showed
(with CSRF); anything else answers in the page and changes nothing."""

from __future__ import annotations

import html as markup

import pytest
from django.test import Client

from changes.models import QuotaChangeRequest
from portal.models import AuditEvent
from tenants.models import Namespace
from tenants.selectors import namespace_etag
from tests.integration.test_deleted_history import applied, decided_and_pending, user

pytestmark = pytest.mark.django_db

DELETE_PAGE = "/admin/tenants/namespace/{pk}/delete/"


def test_the_delete_page_says_what_leaves_the_cluster_and_what_history_stays(
    demo: None, client: Client
) -> None:
    _, pending = decided_and_pending()
    namespace = Namespace.objects.get(name="team-a")
    applied("Namespace", "team-a")
    applied("ResourceQuota", "team-a-gpu-quota", "team-a")
    applied("LimitRange", "team-a-gpu-defaults", "team-a", adopted=True)
    client.force_login(user("admin"))
    page = client.get(DELETE_PAGE.format(pk=namespace.pk))
    assert page.status_code == 200
    html = page.content.decode()
    for said in (
        "Deleting a namespace removes the portal&#x27;s objects in it from the cluster",
        "Namespace team-a is deleted, and Kubernetes deletes every pod, job, volume claim",
        "ResourceQuota team-a-gpu-quota is deleted.",
        "LimitRange team-a-gpu-defaults stays: it was there before the portal",
        "2 quota requests about it stay in the history, shown as “team-a (deleted)”.",
        f"Pending request #{pending.pk} is cancelled, with the reason",
        "The audit log keeps every event about the namespace.",
        'name="csrfmiddlewaretoken"',
        f'name="version" value="{markup.escape(namespace_etag(namespace))}"',
    ):
        assert said in html, said
    assert html.index("Namespace team-a is deleted") < html.index("ResourceQuota team-a-gpu")


def test_the_delete_page_deletes_nothing_without_the_typed_name_or_on_a_stale_version(
    demo: None, client: Client
) -> None:
    _, pending = decided_and_pending()
    namespace = Namespace.objects.get(name="team-a")
    url = DELETE_PAGE.format(pk=namespace.pk)
    version = namespace_etag(namespace)
    client.force_login(user("admin"))

    for typed in ("", "team-b", "team"):
        refused = client.post(url, {"confirm_name": typed, "version": version})
        assert refused.status_code == 422
        assert "Type the namespace&#x27;s name, team-a, to delete it." in refused.content.decode()
    unconfirmed = client.post(url, {"post": "yes"})  # the stock admin's confirmation
    assert unconfirmed.status_code == 422
    ask_elsewhere = namespace.quota_items.get(resource="requests.nvidia.com/gpu")
    ask_elsewhere.hard = "40"  # someone changes the quota while the page is open
    ask_elsewhere.save()
    stale = client.post(url, {"confirm_name": "team-a", "version": version})
    assert stale.status_code == 409
    assert "changed since this page was opened" in stale.content.decode()
    fresh = markup.escape(namespace_etag(namespace))
    assert f'value="{fresh}"' in stale.content.decode()  # the version to confirm now
    assert Namespace.objects.filter(name="team-a").exists()
    assert QuotaChangeRequest.objects.get(pk=pending.pk).state == "pending"
    assert not AuditEvent.objects.filter(event__in=["namespace.deleted", "quota_change.voided"])

    done = client.post(url, {"confirm_name": "team-a", "version": namespace_etag(namespace)})
    assert (done.status_code, done["Location"]) == (302, "/admin/tenants/namespace/")
    assert not Namespace.objects.filter(name="team-a").exists()
    assert QuotaChangeRequest.objects.get(pk=pending.pk).state == "cancelled"
    deleted = AuditEvent.objects.get(event="namespace.deleted")
    assert (deleted.source, deleted.actor_name) == ("admin", "admin")
