"""The home's one read of a user's teams and all they are set up with: the same teams,
namespaces, quota items, limits, LocalQueues with their ClusterQueues and priority classes
as ``list_teams_for_user`` gives, in the same order, in one query at any size."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import AnonymousUser
from django.db import connection
from django.test.utils import CaptureQueriesContext

from queues.selectors import teams_set_up
from tenants.models import LimitRangeItem, PriorityClass, QuotaItem, Team
from tenants.selectors import list_teams_for_user
from tests.factories import (
    ClusterQueueFactory,
    LocalQueueFactory,
    MembershipFactory,
    NamespaceFactory,
    TeamFactory,
)

pytestmark = pytest.mark.django_db

GROUPS = [
    {
        "coveredResources": ["nvidia.com/gpu"],
        "flavors": [{"name": "h100", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 8}]}],
    }
]


def set_up(team: Team, index: int) -> None:
    """Two namespaces (named so that the second sorts first), each with quota items, limits
    and two LocalQueues; three allowed priority classes."""
    for suffix in ("zz", "aa"):
        ns = NamespaceFactory(name=f"{team.slug}-{index}-{suffix}", team=team)
        for resource, hard in (("requests.nvidia.com/gpu", "8"), ("limits.memory", "64Gi")):
            QuotaItem.objects.create(namespace=ns, resource=resource, hard=hard)
        LimitRangeItem.objects.create(namespace=ns, limit_type="Container", resource="cpu", max="8")
        LimitRangeItem.objects.create(
            namespace=ns, limit_type="Container", resource="memory", default="1Gi"
        )
        for name in ("train", "infer"):
            cq = ClusterQueueFactory(name=f"{ns.name}-{name}", resource_groups=GROUPS)
            LocalQueueFactory(name=f"{ns.name}-{name}", namespace=ns, cluster_queue=cq)
    for value in (100, 1000, 10):
        pc, _ = PriorityClass.objects.get_or_create(name=f"pc-{value}", defaults={"value": value})
        team.allowed_priority_classes.add(pc)


def shape(teams: list[Team]) -> list[Any]:
    """Everything the home reads of the teams, as plain values."""
    return [
        (
            t.pk,
            t.slug,
            t.name,
            t.description,
            [
                (pc.pk, pc.name, pc.value, pc.global_default)
                for pc in t.allowed_priority_classes.all()
            ],
            [
                (
                    ns.pk,
                    ns.name,
                    ns.team_id,
                    ns.team.slug,
                    ns.quota_name,
                    [(q.pk, q.resource, q.hard, q.namespace_id) for q in ns.quota_items.all()],
                    [(i.limit_type, i.resource, i.default, i.max) for i in ns.limit_items.all()],
                    [
                        (lq.pk, lq.name, lq.cluster_queue.name, lq.cluster_queue.resource_groups)
                        for lq in ns.local_queues.all()
                    ],
                )
                for ns in t.namespaces.all()
            ],
        )
        for t in teams
    ]


@pytest.mark.parametrize("teams", [2, 6])
def test_a_lead_gets_their_teams_as_the_shared_selector_does_in_one_query(
    team_a_admin: Any, teams: int
) -> None:
    team_a = team_a_admin.memberships.get().team
    set_up(team_a, 0)
    for index in range(1, teams):
        other = TeamFactory(slug=f"team-{index:02d}")
        set_up(other, index)
        if index % 2:  # a member only: may not ask for it
            MembershipFactory(user=team_a_admin, team=other, role="member")
    team_a_admin._qm_roles = set()  # read once per request, as the middleware does
    with CaptureQueriesContext(connection) as queries:
        got = teams_set_up(team_a_admin)
        got_shape = shape(got)
    assert len(queries) == 1
    assert got_shape == shape(list(list_teams_for_user(team_a_admin)))
    assert {t.slug: t.may_ask for t in got} == {  # type: ignore[attr-defined]
        "team-a": True,
        **{f"team-{i:02d}": False for i in range(1, teams) if i % 2},
    }


def test_a_platform_admin_gets_every_team_and_may_ask_for_each(
    platform_admin: Any, team_a: Team, team_b: Team
) -> None:
    set_up(team_b, 1)
    got = teams_set_up(platform_admin)
    assert shape(got) == shape(list(list_teams_for_user(platform_admin)))
    assert [(t.slug, t.may_ask) for t in got] == [("team-a", True), ("team-b", True)]  # type: ignore[attr-defined]


def test_nobody_signed_in_and_a_user_of_no_team_get_no_team(
    team_a_admin: Any, team_b_member: Any
) -> None:
    assert teams_set_up(AnonymousUser()) == []
    team_b_member.memberships.all().delete()
    assert teams_set_up(team_b_member) == []
    assert [t.slug for t in teams_set_up(team_a_admin)] == ["team-a"]  # a team without anything


@pytest.mark.django_db(transaction=True)  # autocommit: the read goes as a prepared statement
def test_one_prepared_read_serves_members_admins_and_a_superuser_alike(
    team_a_admin: Any, team_b_member: Any, platform_admin: Any, team_a: Team, team_b: Team
) -> None:
    """The statement is prepared once it has been sent five times, and then planned for any
    user: a member still gets their own teams, an admin (also a member of one) every team
    once, a superuser every team."""
    set_up(team_b, 1)
    MembershipFactory(user=platform_admin, team=team_b, role="member")
    superuser = type(team_a_admin).objects.create_superuser("root", password="unused")
    users = [team_a_admin] * 5 + [team_b_member, platform_admin, superuser, team_a_admin]
    with connection.cursor() as cursor:
        cursor.execute("DEALLOCATE ALL")  # psycopg forgets its own list on seeing it
    for user in users:
        user._qm_roles = None  # each read as a new request would
        assert shape(teams_set_up(user)) == shape(list(list_teams_for_user(user))), user
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement FROM pg_prepared_statements")
        assert any("tenants_team" in row[0] for row in cursor.fetchall())
    slugs = [t.slug for t in teams_set_up(platform_admin)]
    assert slugs == ["team-a", "team-b"]
