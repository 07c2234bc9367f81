"""Reads of idle GPUs for the acting user: the spells of their own teams (every team's for
platform admins and approvers: the redaction rule), in a fixed number of queries."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from decimal import Decimal

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db.models import F, Q, QuerySet
from django.http import Http404
from django.utils import timezone

from cluster.models import Cluster
from idle.models import IdlePolicy, IdleSpell
from idle.services import max_gap
from portal.access.permissions import sees_every_team
from portal.access.selectors import teams_seen_by
from portal.vocabulary.numbers import to_cent
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


# What the spells' wasted GPU-hours cost: (the currency, each spell's exact amount by its
# id, None where no price holds). The prices are costs/'s, which sits above idle (it prices
# usage's rollups, above idle), so it fills this when Django starts (costs/apps.py) instead
# of an upward import. Unfilled: no money is said.
SpellCosts = Callable[[Sequence[IdleSpell], dt.datetime], tuple[str, dict[int, Decimal | None]]]
_spell_costs: list[SpellCosts] = []


def priced_by(costs: SpellCosts) -> None:
    """Price the list's spells with ``costs`` (a fixed number of queries for any number)."""
    _spell_costs[:] = [costs]


@dataclass(frozen=True)
class Row:
    """One line of the list, with what it has wasted so far: GPU-hours and, where prices
    are known, their cost at the price that held then (``cost`` None: no price)."""

    spell: IdleSpell
    gpu_hours: float
    state: str  # idle, not read, suspended, exempt, ended
    cost: Decimal | None = None  # exact
    currency: str = ""

    @property
    def money(self) -> str | None:
        return None if self.cost is None else money(self.cost)


def money(amount: Decimal) -> str:
    """An exact amount to the cent, half to even (the costs' rounding rule), once."""
    return str(to_cent(amount))


def rows_of(spells: QuerySet[IdleSpell]) -> list[Row]:
    now = timezone.now()
    gap = max_gap()
    listed = list(spells)
    currency, costs = _spell_costs[0](listed, now) if _spell_costs else ("", {})
    out = []
    for spell in listed:
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
        out.append(Row(spell, spell.gpu_hours(now), state, costs.get(spell.pk), currency))
    return out


def policies_of(teams: list[Team]) -> dict[int, IdlePolicy]:
    """The teams' saved policies (a team without one: off). One query."""
    return {p.team_id: p for p in IdlePolicy.objects.filter(team__in=teams)}
