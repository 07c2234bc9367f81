"""A budget in money: what the team's invoice says it cost so far (costs' chargeback at
each day's price), in the prices' currency; refused while no price is set."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

import pytest
from django.core.exceptions import ValidationError

from budgets.models import Budget
from budgets.rows import rows_of
from budgets.services import save_budget
from costs import selectors as costs
from tests.unit.costs.history import NOVEMBER, made

pytestmark = pytest.mark.django_db

NOW = dt.datetime(2026, 11, 20, 12, tzinfo=dt.UTC)


def money(team: Any, actor: Any, amount: str) -> Budget:
    return save_budget(
        actor=actor,
        budget=Budget(team=team, unit="money", amount=Decimal(amount)),
        source="web",
        now=NOW,
    )


def test_a_money_budget_counts_what_the_invoice_says_in_its_currency(
    team_a: Any, team_b: Any, platform_admin: Any
) -> None:
    with pytest.raises(ValidationError) as refused:
        money(team_a, platform_admin, "1000")
    assert "money budgets need prices" in refused.value.message_dict["unit"][0]
    made()  # team-a: 946.29 in November (the costs tests' hand-computed figure)
    budgets = [money(team_a, platform_admin, "1000"), money(team_b, platform_admin, "500")]
    rows = {row.budget.team.slug: row for row in rows_of(budgets, NOW)}
    a, b = rows["team-a"].standing, rows["team-b"].standing
    invoice = costs.team_cost("team-a", NOVEMBER, dt.date(2026, 12, 1))
    assert invoice == Decimal("946.29")
    assert a.spent == float(invoice) and a.unit == "USD"
    assert round(a.percent) == 95 and not a.spent_out
    assert b.spent == float(costs.team_cost("team-b", NOVEMBER, dt.date(2026, 12, 1)))
    assert b.spent_out  # team-b's November is over 500
