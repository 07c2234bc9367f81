from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from budgets import services
from budgets.models import Budget, BudgetExtension, BudgetWarning
from portal.admin import ReadOnlyAdmin, ServiceAdmin


@admin.register(Budget)
class BudgetAdmin(ServiceAdmin):
    list_display = ["team", "unit", "amount", "period", "starts", "ends", "enforce"]
    list_filter = ["unit", "period", "enforce"]
    list_select_related = ["team"]
    search_fields = ["team__slug"]

    def save(self, request: HttpRequest, obj: Any, form: Any) -> None:
        services.save_budget(actor=request.user, budget=obj, source="admin")

    def delete(self, request: HttpRequest, obj: Any) -> None:
        services.delete_budget(actor=request.user, budget=obj, source="admin", confirmed=True)


@admin.register(BudgetExtension)
class BudgetExtensionAdmin(ReadOnlyAdmin):
    """Extensions are asked for and decided on the budget's page (or the API)."""

    list_display = ["pk", "budget", "amount", "state", "requested_by", "decided_by", "created_at"]
    list_filter = ["state"]
    list_select_related = ["budget__team", "requested_by", "decided_by"]


@admin.register(BudgetWarning)
class BudgetWarningAdmin(ReadOnlyAdmin):
    list_display = ["budget", "period_start", "threshold", "spent", "limit", "at"]
    list_select_related = ["budget__team"]
