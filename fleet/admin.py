"""Node pools and custom MIG configs in the admin: every write through ``fleet.services``
(validated, audited and applied as from any other door)."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from cluster.admin import ClusterScopedAdmin
from fleet import services
from fleet.models import MigConfig, NodePool
from portal.admin import ServiceAdmin


@admin.register(NodePool)
class NodePoolAdmin(ClusterScopedAdmin):
    list_display = ["name", "cluster", "purpose", "mig_config", "node_selector"]
    list_filter = ["cluster", "purpose"]
    list_select_related = ["cluster"]
    search_fields = ["name"]

    def save(self, request: HttpRequest, obj: Any, form: Any) -> None:
        services.save_node_pool(actor=request.user, pool=obj, source="admin")

    def delete(self, request: HttpRequest, obj: Any) -> None:
        services.delete_fleet_object(actor=request.user, obj=obj, source="admin")


@admin.register(MigConfig)
class MigConfigAdmin(ServiceAdmin):
    list_display = ["name", "gpu_model", "devices", "description"]
    list_filter = ["gpu_model"]
    search_fields = ["name"]

    def save(self, request: HttpRequest, obj: Any, form: Any) -> None:
        services.save_mig_config(actor=request.user, config=obj, source="admin")

    def delete(self, request: HttpRequest, obj: Any) -> None:
        services.delete_fleet_object(actor=request.user, obj=obj, source="admin")
