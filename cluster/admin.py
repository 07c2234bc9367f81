"""What the loop observed and applied, in the admin: read-only (the poller and the applier
write it)."""

from __future__ import annotations

from django.contrib import admin

from cluster.models import (
    AppliedObject,
    Drift,
    ObservedNode,
    ObservedObject,
    ObservedPod,
    SyncRun,
)
from portal.admin import ReadOnlyAdmin


@admin.register(AppliedObject)
class AppliedObjectAdmin(ReadOnlyAdmin):
    list_display = [
        "kind",
        "namespace",
        "name",
        "outcome",
        "attempts",
        "applied_at",
        "message",
        "warnings",
    ]
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
