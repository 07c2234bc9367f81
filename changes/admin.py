"""Reviewed changes in the admin: read-only (decisions happen on the request pages and the
API, never here)."""

from __future__ import annotations

from typing import Any

from django.contrib import admin

from changes.models import MigChangeRequest, MigChangeStep
from portal.admin import ReadOnlyAdmin


class MigChangeStepInline(admin.TabularInline):
    model = MigChangeStep
    extra = 0
    can_delete = False
    readonly_fields = ["round", "node", "step", "status", "message", "started_at", "finished_at"]

    def has_add_permission(self, request: Any, obj: Any = None) -> bool:
        return False


@admin.register(MigChangeRequest)
class MigChangeRequestAdmin(ReadOnlyAdmin):
    """Decisions happen through the request pages and the API (never edited here)."""

    list_display = [
        "pk",
        "team",
        "target_config",
        "verdict",
        "state",
        "requested_by",
        "decided_by",
        "created_at",
    ]
    list_filter = ["state", "verdict", "team"]
    inlines = [MigChangeStepInline]
