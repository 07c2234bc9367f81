from __future__ import annotations

from django.contrib import admin

from fleet.admin import ReadOnlyAdmin
from sync.models import AppliedObject, ObservedObject, SyncRun


@admin.register(AppliedObject)
class AppliedObjectAdmin(ReadOnlyAdmin):
    list_display = ["kind", "namespace", "name", "outcome", "attempts", "applied_at", "message"]
    list_filter = ["outcome", "kind"]
    search_fields = ["name", "namespace", "message"]


@admin.register(ObservedObject)
class ObservedObjectAdmin(ReadOnlyAdmin):
    list_display = ["kind", "namespace", "name", "resource_version", "last_seen"]
    list_filter = ["kind"]
    search_fields = ["name", "namespace"]


@admin.register(SyncRun)
class SyncRunAdmin(ReadOnlyAdmin):
    list_display = ["started_at", "duration_ms", "nodes", "pods", "changed", "error"]
