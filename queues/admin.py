from __future__ import annotations

from typing import Any

from django.contrib import admin

from portal.admin import AuditedAdmin, ClusterScopedAdmin
from portal.quantity import format_quantity
from queues.models import ClusterQueue, Cohort, LocalQueue, ResourceFlavor


@admin.register(ResourceFlavor)
class ResourceFlavorAdmin(ClusterScopedAdmin):
    list_display = ["name", "cluster", "node_labels", "topology_name"]
    list_filter = ["cluster"]
    search_fields = ["name"]


@admin.register(Cohort)
class CohortAdmin(ClusterScopedAdmin):
    list_display = ["name", "cluster", "parent", "fair_sharing_weight"]
    list_filter = ["cluster"]
    list_select_related = ["parent", "cluster"]
    search_fields = ["name"]


class LocalQueueInline(admin.TabularInline):
    model = LocalQueue
    extra = 0
    autocomplete_fields = ["namespace"]


@admin.register(ClusterQueue)
class ClusterQueueAdmin(ClusterScopedAdmin):
    list_display = [
        "name",
        "cluster",
        "cohort",
        "fair_sharing_weight",
        "nominal_quota",
        "queueing_strategy",
        "stop_policy",
    ]
    list_filter = ["cluster", "cohort", "queueing_strategy", "stop_policy"]
    list_select_related = ["cohort", "cluster"]
    search_fields = ["name"]
    inlines = [LocalQueueInline]

    @admin.display(description="nominal quota (flavor: resource)")
    def nominal_quota(self, cq: ClusterQueue) -> str:
        return "; ".join(
            f"{flavor}: {resource.removeprefix('nvidia.com/')} {format_quantity(value)}"
            for (flavor, resource), value in cq.quota().items()
        )


@admin.register(LocalQueue)
class LocalQueueAdmin(AuditedAdmin):
    list_display = ["name", "namespace", "cluster_queue", "stop_policy"]
    list_filter = ["cluster_queue", "namespace__team", "stop_policy"]
    list_select_related = ["namespace", "cluster_queue"]
    search_fields = ["name", "namespace__name"]
    autocomplete_fields = ["namespace"]

    def get_readonly_fields(self, request: Any, obj: Any = None) -> Any:
        # Kueue makes spec.clusterQueue immutable: a LocalQueue is recreated, not retargeted.
        return ["cluster_queue"] if obj is not None else []

    def team_of(self, obj: Any) -> Any:
        return obj.namespace.team
