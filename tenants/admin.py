from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db.models import Count

from portal.admin import AuditedAdmin
from tenants.models import LimitRangeItem, Membership, Namespace, PriorityClass, QuotaItem, Team


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 0
    autocomplete_fields = ["user"]


class NamespaceInline(admin.TabularInline):
    model = Namespace
    extra = 0
    show_change_link = True


@admin.register(Team)
class TeamAdmin(AuditedAdmin):
    list_display = ["slug", "name", "namespace_count", "member_count"]
    search_fields = ["slug", "name"]
    filter_horizontal = ["allowed_priority_classes"]
    inlines = [MembershipInline, NamespaceInline]

    def get_queryset(self, request: Any) -> Any:
        return (
            super()
            .get_queryset(request)
            .annotate(
                _namespaces=Count("namespaces", distinct=True),
                _members=Count("memberships", distinct=True),
            )
        )

    @admin.display(description="namespaces", ordering="_namespaces")
    def namespace_count(self, team: Any) -> int:
        return int(team._namespaces)

    @admin.display(description="members", ordering="_members")
    def member_count(self, team: Any) -> int:
        return int(team._members)

    def team_of(self, obj: Any) -> Any:
        return obj


@admin.register(Membership)
class MembershipAdmin(AuditedAdmin):
    list_display = ["user", "team", "role"]
    list_filter = ["role", "team"]
    search_fields = ["user__username", "team__slug"]
    autocomplete_fields = ["user", "team"]

    def team_of(self, obj: Any) -> Any:
        return obj.team


class QuotaItemInline(admin.TabularInline):
    model = QuotaItem
    extra = 1


class LimitRangeItemInline(admin.TabularInline):
    model = LimitRangeItem
    extra = 0


@admin.register(Namespace)
class NamespaceAdmin(AuditedAdmin):
    list_display = ["name", "team"]
    list_filter = ["team"]
    search_fields = ["name", "team__slug"]
    list_select_related = ["team"]
    inlines = [QuotaItemInline, LimitRangeItemInline]

    def team_of(self, obj: Any) -> Any:
        return obj.team


@admin.register(QuotaItem)
class QuotaItemAdmin(AuditedAdmin):
    list_display = ["namespace", "resource", "hard", "warning"]
    list_filter = ["namespace__team", "resource"]
    search_fields = ["namespace__name", "resource"]
    list_select_related = ["namespace"]

    @admin.display(description="note")
    def warning(self, item: QuotaItem) -> str:
        return " ".join(item.warnings)

    def team_of(self, obj: Any) -> Any:
        return obj.namespace.team


@admin.register(LimitRangeItem)
class LimitRangeItemAdmin(AuditedAdmin):
    list_display = [
        "namespace",
        "limit_type",
        "resource",
        "default",
        "default_request",
        "max",
        "min",
    ]
    list_filter = ["namespace__team", "limit_type"]
    search_fields = ["namespace__name", "resource"]
    list_select_related = ["namespace"]

    def team_of(self, obj: Any) -> Any:
        return obj.namespace.team


@admin.register(PriorityClass)
class PriorityClassAdmin(AuditedAdmin):
    list_display = ["name", "value", "preemption_policy", "global_default"]
    list_filter = ["preemption_policy", "global_default"]
    search_fields = ["name"]
