"""Node pools and custom MIG configs in the admin (every save audited and applied)."""

from __future__ import annotations

from django.contrib import admin

from fleet.models import MigConfig, NodePool
from portal.admin import AuditedAdmin, ClusterScopedAdmin


@admin.register(NodePool)
class NodePoolAdmin(ClusterScopedAdmin):
    list_display = ["name", "cluster", "purpose", "mig_config", "node_selector"]
    list_filter = ["cluster", "purpose"]
    list_select_related = ["cluster"]
    search_fields = ["name"]


@admin.register(MigConfig)
class MigConfigAdmin(AuditedAdmin):
    list_display = ["name", "gpu_model", "devices", "description"]
    list_filter = ["gpu_model"]
    search_fields = ["name"]
