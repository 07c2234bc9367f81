"""Shared fixtures: the standard cast and the demo scenario."""

from __future__ import annotations

from typing import Any

import pytest

from portal.demo import load_demo
from portal.models import PlatformRole
from tests.factories import MembershipFactory, TeamFactory, UserFactory


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
