"""A budget as the pages show it (the budgets page, a budget's page, a team's home): where
it stands, the team's LocalQueues, and what enforcement does or would do, in words."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass

from django.utils import timezone

from budgets.models import Budget
from budgets.selectors import queues_of, standings
from budgets.standing import Standing
from queues.models import LocalQueue
from tenants.models import Team


def _names(queues: Sequence[LocalQueue]) -> str:
    shown = [f"{lq.namespace.name}/{lq.name}" for lq in queues]
    return ", ".join(shown[:-1]) + f" and {shown[-1]}" if len(shown) > 1 else "".join(shown)


def _on(time: dt.datetime) -> str:
    return f"{time:%-d %b %Y %H:%M} UTC"


def enforcement_sentence(
    budget: Budget, standing: Standing, queues: Sequence[LocalQueue], now: dt.datetime
) -> str:
    """What enforcement does, or would do were it on, in one sentence."""
    noun = "queue" if len(queues) == 1 else "queues"
    if not queues:
        return "The team has no LocalQueue: enforcement would have nothing to hold."
    if now < standing.window.start:
        return "The period has not begun: nothing is held."
    if now >= standing.window.end:
        return "The period has ended: nothing is held."
    held = [lq for lq in queues if lq.budget_hold]
    if budget.enforce and held:
        return (
            f"Holding {noun} {_names(held)}: nothing new is admitted, running work goes on, "
            "until the period ends or an extension is granted."
        )
    when = standing.runs_out_at
    later = (
        f"when the budget is spent (at the rate so far, around {_on(when)})"
        if when is not None
        else "when the budget is spent (at the rate so far, not this period)"
    )
    if budget.enforce:
        return f"Would hold {noun} {_names(queues)} {later}."
    if standing.spent_out:
        return f"Enforcement is off: with it on, it would hold {noun} {_names(queues)} now."
    return f"Enforcement is off: with it on, it would hold {noun} {_names(queues)} {later}."


@dataclass
class Row:
    """A budget as the pages show it."""

    budget: Budget
    standing: Standing
    queues: list[LocalQueue]
    enforcement: str

    @property
    def held(self) -> bool:
        return any(lq.budget_hold for lq in self.queues)


def rows_of(budgets: Sequence[Budget], now: dt.datetime | None = None) -> list[Row]:
    """The pages' rows: four queries, whatever the number of budgets."""
    now = now or timezone.now()
    stand = standings(budgets, now)
    queues = queues_of([b.team for b in budgets])
    return [
        Row(
            b,
            stand[b.pk],
            queues[b.team_id],
            enforcement_sentence(b, stand[b.pk], queues[b.team_id], now),
        )
        for b in budgets
    ]


def budget_rows_of_teams(teams: Sequence[Team], budgets: Sequence[Budget]) -> dict[int, Row]:
    """The row of each of ``teams`` that has a budget (``budgets``: theirs, as read with
    the home's other reads): no query when none has one, four otherwise."""
    by_pk = {team.pk: team for team in teams}
    for budget in budgets:
        budget.team = by_pk[budget.team_id]
    return {row.budget.team_id: row for row in rows_of(budgets)} if budgets else {}
