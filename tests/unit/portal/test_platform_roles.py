"""Platform roles are granted and revoked through ``portal.access.roles``, from the admin too:
platform admins only, the last platform admin keeps the role (the service's words on the
page, nothing written), and each change is one audit row naming the admin who made it."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied, ValidationError
from django.test import Client

from portal.access.roles import grant_platform_role, revoke_platform_role
from portal.models import AuditEvent, PlatformRole
from tests.admin_forms import audited_since, last_audit, page_text

pytestmark = pytest.mark.django_db
ADD = "/admin/portal/platformrole/add/"


def delete_url(role: PlatformRole) -> str:
    return f"/admin/portal/platformrole/{role.pk}/delete/"


def test_revoking_the_last_platform_admin_in_the_admin_is_refused(admin_site: Client) -> None:
    last = PlatformRole.objects.get(role="admin")
    before = last_audit()
    answer = admin_site.post(delete_url(last), {"post": "yes"}, follow=True)
    assert answer.status_code == 200
    assert (
        "The last platform admin, admin, keeps the role: grant it to someone else first, or "
        "nobody could grant it again."
    ) in page_text(answer)
    assert PlatformRole.objects.filter(pk=last.pk).exists()
    assert audited_since(before) == []


def test_a_role_granted_in_the_admin_is_one_audit_row_naming_the_admin(
    admin_site: Client,
) -> None:
    lead = User.objects.get(username="lead-a")
    before = last_audit()
    answer = admin_site.post(ADD, {"user": str(lead.pk), "role": "admin"})
    assert answer.status_code == 302, page_text(answer)[-1500:]
    assert PlatformRole.objects.filter(user=lead, role="admin", granted_by="portal").exists()
    assert audited_since(before) == [("platform_role.granted", "admin", "admin")]
    assert AuditEvent.objects.latest("pk").new == {"user": "lead-a", "role": "admin"}
    # with another admin, the first one's role may go: one row again, naming who revoked it
    before = last_audit()
    first = PlatformRole.objects.get(user__username="admin", role="admin")
    assert admin_site.post(delete_url(first), {"post": "yes"}).status_code == 302
    assert not PlatformRole.objects.filter(pk=first.pk).exists()
    assert audited_since(before) == [("platform_role.revoked", "admin", "admin")]


def test_a_role_held_already_is_refused_on_the_add_form_with_nothing_written(
    admin_site: Client,
) -> None:
    approver = User.objects.get(username="approver")
    before = last_audit()
    answer = admin_site.post(ADD, {"user": str(approver.pk), "role": "approver"})
    assert answer.status_code == 200
    assert PlatformRole.objects.filter(user=approver).count() == 1
    assert audited_since(before) == []


def test_only_a_platform_admin_grants_or_revokes(demo: None) -> None:
    lead = User.objects.get(username="lead-a")
    approver = User.objects.get(username="approver")
    before = last_audit()
    with pytest.raises(PermissionDenied):
        grant_platform_role(actor=approver, user=lead, role="admin", source="web")
    with pytest.raises(PermissionDenied):
        revoke_platform_role(
            actor=approver, platform_role=PlatformRole.objects.get(user=approver), source="web"
        )
    with pytest.raises(ValidationError) as caught:
        grant_platform_role(
            actor=User.objects.get(username="admin"), user=lead, role="owner", source="web"
        )
    assert caught.value.message_dict == {
        "role": ["Unknown platform role 'owner' (one of admin, approver)."]
    }
    assert not PlatformRole.objects.filter(user=lead).exists()
    assert audited_since(before) == []
