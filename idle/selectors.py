"""Reads of idle GPUs for the acting user: the spells of their own teams (every team's for
platform admins and approvers: the redaction rule), in a fixed number of queries."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db.models import F, Q, QuerySet
from django.http import Http404
from django.utils import timezone

from cluster.models import Cluster
from idle.models import IdlePolicy, IdleSpell
from idle.services import max_gap
from portal.access.permissions import sees_every_team
from portal.access.selectors import teams_seen_by
from tenants.models import Team

User = AbstractBaseUser | AnonymousUser
# Spells that ended stay on the list this long (what the policy suspended, what woke up).
RECENT = dt.timedelta(days=1)


def spells_for(
    user: User, *, team: Team | None = None, cluster: Cluster | None = None
) -> QuerySet[IdleSpell]:
    """Open spells and those ended in the last day, of the teams ``user`` sees (a spell in a
    namespace of no team: only to those who see every team)."""
    now = timezone.now()
    spells = (
        IdleSpell.objects.on_every_cluster() if cluster is None else IdleSpell.objects.on(cluster)
    )
    spells = spells.filter(Q(ended_at__isnull=True) | Q(ended_at__gte=now - RECENT))
    if not sees_every_team(user):
        spells = spells.filter(team__in=teams_seen_by(user))
    if team is not None:
        spells = spells.filter(team=team)
    open_first = F("ended_at").asc(nulls_first=True)
    return spells.select_related("team", "cluster").order_by(open_first, "idle_since", "pk")


def team_seen_by(user: User, slug: str) -> Team:
    """One of the user's teams by slug (another team is a 404, as if it did not exist)."""
    team = teams_seen_by(user).filter(slug=slug).first()
    if team is None:
        raise Http404("No such team.")
    return Team.objects.get(pk=team.pk)


@dataclass(frozen=True)
class Row:
    """One line of the list, with what it has wasted so far."""

    spell: IdleSpell
    gpu_hours: float
    state: str  # idle, not read, suspended, exempt, ended
    # Money: once the portal knows prices per GPU-hour (chargeback), the cost of
    # ``gpu_hours`` goes here; until then no figure is shown.
    cost: None = None


def rows_of(spells: QuerySet[IdleSpell]) -> list[Row]:
    now = timezone.now()
    gap = max_gap()
    out = []
    for spell in spells:
        if spell.suspended_at is not None:
            state = "suspended"
        elif spell.ended_at is not None:
            state = "ended"
        elif now - spell.last_seen > gap:
            state = "not read"
        elif spell.note:
            state = "exempt"
        else:
            state = "idle"
        out.append(Row(spell, spell.gpu_hours(now), state))
    return out


def policies_of(teams: list[Team]) -> dict[int, IdlePolicy]:
    """The teams' saved policies (a team without one: off). One query."""
    return {p.team_id: p for p in IdlePolicy.objects.filter(team__in=teams)}
