"""Prices and the cost policy in the admin: every write through ``costs.services``
(validated and audited as from the page and the API)."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from costs import services
from costs.models import CostPolicy, Price
from portal.admin import ServiceAdmin


@admin.register(Price)
class PriceAdmin(ServiceAdmin):
    list_display = ["gpu_model", "profile", "device_class", "per_hour", "effective_from", "note"]
    list_filter = ["gpu_model"]
    search_fields = ["gpu_model", "profile", "device_class"]

    def save(self, request: HttpRequest, obj: Any, form: Any) -> None:
        services.save_price(actor=request.user, price=obj, source="admin")

    def delete(self, request: HttpRequest, obj: Any) -> None:
        # the admin's own delete page asked first
        services.delete_price(actor=request.user, price=obj, source="admin", confirmed=True)


@admin.register(CostPolicy)
class CostPolicyAdmin(ServiceAdmin):
    list_display = ["currency", "idle_sharing"]

    def save(self, request: HttpRequest, obj: Any, form: Any) -> None:
        services.set_cost_policy(
            actor=request.user,
            currency=obj.currency,
            idle_sharing=obj.idle_sharing,
            source="admin",
        )

    def has_add_permission(self, request: HttpRequest) -> bool:
        return super().has_add_permission(request) and not CostPolicy.objects.exists()

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
