"""The tenants' entry-point services (those only pages and the API call) each run in a
transaction of their own, as the changes' do: called inside another one they refuse before
doing anything. The API's guarded write is the entry point of the writes it wraps (the
services inside it stay nestable: the admin and the onboarding call them in theirs)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from django.contrib.auth.models import User
from django.db import transaction
from rest_framework.test import APIRequestFactory

from portal.api.safety import guarded_write
from tenants import services
from tenants.models import Membership, Namespace, Team
from tenants.selectors import namespace_etag

pytestmark = pytest.mark.django_db


def admin() -> User:
    return User.objects.get(username="admin")


ENTRY_POINTS: dict[str, Callable[[], object]] = {
    "add a member": lambda: services.set_team_member(
        actor=admin(),
        team=Team.objects.get(slug="team-a"),
        username="viewer-dev",
        role="member",
        source="web",
    ),
    "remove a member": lambda: services.remove_team_member(
        actor=admin(),
        membership_id=Membership.objects.get(user__username="member-a", team__slug="team-a").pk,
        team=Team.objects.get(slug="team-a"),
        source="web",
    ),
    "delete a namespace": lambda: services.delete_namespace_confirmed(
        actor=admin(),
        namespace_id=Namespace.objects.get(name="team-a").pk,
        typed_name="team-a",
        version=namespace_etag(Namespace.objects.get(name="team-a")),
        source="admin",
    ),
}


@pytest.mark.parametrize("name", list(ENTRY_POINTS))
def test_an_entry_point_refuses_to_run_inside_another_transaction(demo: None, name: str) -> None:
    memberships = sorted(Membership.objects.values_list("pk", "role"))
    with pytest.raises(RuntimeError, match="durable"), transaction.atomic():
        ENTRY_POINTS[name]()
    assert sorted(Membership.objects.values_list("pk", "role")) == memberships
    assert Namespace.objects.on_every_cluster().filter(name="team-a").exists()


def test_the_apis_guarded_write_is_an_entry_point(demo: None) -> None:
    request = APIRequestFactory().patch("/api/v1/teams/team-a/")
    team = Team.objects.get(slug="team-a")
    write = guarded_write(request, Team.objects.all(), team.pk, lambda t: '"v"')  # type: ignore[arg-type]
    with pytest.raises(RuntimeError, match="durable"), transaction.atomic(), write:
        pass  # pragma: no cover - refused on entry
