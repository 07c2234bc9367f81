from __future__ import annotations

from typing import Any

from django.contrib import admin

from fleet.models import Drift, NodePool, ObservedNode, ObservedPod
from portal.admin import AuditedAdmin


@admin.register(NodePool)
class NodePoolAdmin(AuditedAdmin):
    list_display = ["name", "purpose", "mig_config", "node_selector"]
    list_filter = ["purpose"]
    search_fields = ["name"]


class ReadOnlyAdmin(admin.ModelAdmin):
    """Observed state is written by the poller only."""

    def has_add_permission(self, request: Any) -> bool:
        return False

    def has_change_permission(self, request: Any, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: Any, obj: Any = None) -> bool:
        return False


@admin.register(ObservedNode)
class ObservedNodeAdmin(ReadOnlyAdmin):
    list_display = [
        "name",
        "gpu_product",
        "gpu_count",
        "mig_config",
        "mig_config_state",
        "pool_label",
        "unschedulable",
        "ready",
        "gone_since",
        "last_changed",
    ]
    list_filter = ["gpu_product", "mig_config", "mig_config_state", "pool_label", "unschedulable"]
    search_fields = ["name"]


@admin.register(ObservedPod)
class ObservedPodAdmin(ReadOnlyAdmin):
    list_display = ["namespace", "name", "phase", "node_name", "gpu_requests", "pending_reason"]
    list_filter = ["phase", "namespace"]
    search_fields = ["name", "namespace", "node_name"]


@admin.register(Drift)
class DriftAdmin(ReadOnlyAdmin):
    list_display = ["subject", "kind", "field", "desired", "observed", "first_seen", "resolved_at"]
    list_filter = ["kind", "resolved_at"]
    search_fields = ["subject"]


from fleet.models import MigChangeRequest, MigChangeStep, MigConfig  # noqa: E402


@admin.register(MigConfig)
class MigConfigAdmin(AuditedAdmin):
    list_display = ["name", "gpu_model", "devices", "description"]
    list_filter = ["gpu_model"]
    search_fields = ["name"]


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
