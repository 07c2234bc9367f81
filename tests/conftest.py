"""Shared fixtures: the standard cast and the demo scenario."""

from __future__ import annotations

from typing import Any

import pytest

from demo.services import load_demo
from portal.models import PlatformRole
from tests.factories import MembershipFactory, TeamFactory, UserFactory


@pytest.fixture(scope="session", autouse=True)
def _close_stray_connections(django_db_setup: Any, django_db_blocker: Any) -> Any:
    """Live-server threads and killed workers can leave sessions on the test database; end
    them before it is dropped (torn down before ``django_db_setup``, which it depends on)."""
    yield
    with django_db_blocker.unblock():
        from django.db import connection

        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )


@pytest.fixture(autouse=True)
def _empty_cache() -> Any:
    """Each test starts with no rate-limit history (the cache is a real Redis database)."""
    from django.core.cache import cache

    cache.clear()
    yield


@pytest.fixture
def team_a(db: Any) -> Any:
    return TeamFactory(slug="team-a", name="Team A")


@pytest.fixture
def team_b(db: Any) -> Any:
    return TeamFactory(slug="team-b", name="Team B")


@pytest.fixture
def team_a_admin(team_a: Any) -> Any:
    """The lead (tenant admin) of team-a."""
    user = UserFactory(username="alice")
    MembershipFactory(user=user, team=team_a, role="lead")
    return user


@pytest.fixture
def team_a_member(team_a: Any) -> Any:
    user = UserFactory(username="bob")
    MembershipFactory(user=user, team=team_a, role="member")
    return user


@pytest.fixture
def team_b_member(team_b: Any) -> Any:
    user = UserFactory(username="charlie")
    MembershipFactory(user=user, team=team_b, role="member")
    return user


@pytest.fixture
def platform_admin(db: Any) -> Any:
    user = UserFactory(username="padmin")
    PlatformRole.objects.create(user=user, role="admin")
    return user


@pytest.fixture
def approver(db: Any) -> Any:
    user = UserFactory(username="dana")
    PlatformRole.objects.create(user=user, role="approver")
    return user


@pytest.fixture
def demo(db: Any) -> None:
    """The seed chapter's scenario, exactly as the run command loads it."""
    load_demo()
