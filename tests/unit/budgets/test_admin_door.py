"""The admin writes budgets through ``budgets.services`` only: a money budget is refused on
the page with the service's field error and nothing written; a valid edit (enforcement
turned on) writes its audit row naming the admin and holds a spent budget's queues."""

from __future__ import annotations

import pytest
from django.test import Client

from budgets.models import Budget
from budgets.services import check_budgets
from queues.models import LocalQueue
from tests.admin_forms import audited_since, change_url, form_data, last_audit, page_text
from tests.unit.budgets.test_budgets import NOW, used

pytestmark = pytest.mark.django_db


def test_the_admin_sets_budgets_through_the_service(admin_site: Client) -> None:
    budget = Budget.objects.get(team__slug="team-a")  # the demo's, not enforced
    data = form_data(admin_site, change_url(budget))
    before = last_audit()
    refused = admin_site.post(change_url(budget), {**data, "thresholds": "[80, 80]"})
    assert refused.status_code == 200
    assert "Each threshold once." in page_text(refused)
    assert Budget.objects.get(pk=budget.pk).unit == "gpu_hours"
    assert audited_since(before) == []
    saved = admin_site.post(change_url(budget), {**data, "enforce": "on"})
    assert saved.status_code == 302, page_text(saved)[-1500:]
    assert audited_since(before)[0] == ("budget.saved", "admin", "admin")
    assert Budget.objects.get(pk=budget.pk).enforce
    used("team-a", 1000)  # spent, whatever the demo's amount: the next check holds
    check_budgets(now=NOW)
    assert LocalQueue.objects.get(name="team-a-train").budget_hold
