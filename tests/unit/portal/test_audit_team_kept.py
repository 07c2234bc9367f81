"""An audit row keeps the name of its team when the team is deleted."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client

from portal.audit.record import SYSTEM, record_audit
from portal.models import AuditEvent
from tenants.models import Team
from tests.support import bearer

pytestmark = pytest.mark.django_db


def test_the_team_name_outlives_the_team(demo: None) -> None:
    team = Team.objects.create(slug="team-gone", name="Gone")
    record_audit(actor=SYSTEM, event="team.created", source="cli", target=team, team=team)
    team.delete()
    row = AuditEvent.objects.get(event="team.created", team_name="team-gone")
    assert row.team is None
    admin = Client()
    admin.force_login(User.objects.get(username="admin"))
    page = admin.get("/audit/?event=team.created").content.decode()
    assert ">team-gone</td>" in page
    listed = Client().get("/api/v1/audit/", headers=bearer("admin")).json()["results"]
    gone = [r for r in listed if r["target_repr"] == str(team)]
    assert [(r["team"], r["team_name"]) for r in gone] == [(None, "team-gone")]
    csv = b"".join(admin.get("/audit/events.csv").streaming_content).decode()
    assert "team-gone" in csv
