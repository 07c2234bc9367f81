"""Taking a managed object's fields back is a platform admin's, through the one service."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.management import CommandError, call_command

from cluster.services import settings_cluster
from loop.services import take_back_fields
from portal.models import AuditEvent

pytestmark = pytest.mark.django_db


def test_a_lead_may_not_take_fields_back_and_nothing_is_recorded(team_a_admin: Any) -> None:
    with pytest.raises(PermissionDenied):
        take_back_fields(
            actor=team_a_admin,
            cluster=settings_cluster(),
            kind="ResourceQuota",
            namespace="team-a",
            name="team-a-gpu-quota",
            source="command",
        )
    with pytest.raises(CommandError, match="Only platform admins"):
        call_command("take_back", "ResourceQuota", "team-a/team-a-gpu-quota", actor="alice")
    assert not AuditEvent.objects.exists()


def test_an_object_the_portal_does_not_manage_is_refused(platform_admin: Any) -> None:
    with pytest.raises(ValidationError, match="manages no ResourceQuota team-a/nothing"):
        take_back_fields(
            actor=platform_admin,
            cluster=settings_cluster(),
            kind="ResourceQuota",
            namespace="team-a",
            name="nothing",
            source="command",
        )
    assert not AuditEvent.objects.exists()
