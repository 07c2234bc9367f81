"""Flavors, cohorts and queues in the admin: every write through ``queues.services``, held
to the same rules as the Queues page and the API (a ClusterQueue's promise beyond the fleet
included)."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.http import HttpRequest, HttpResponse

from cluster.admin import ClusterScopedAdmin, ClusterScopedForm
from portal import removal
from portal.admin import ServiceAdmin, save_rows
from portal.vocabulary.quantity import format_quantity
from queues import services
from queues.models import ClusterQueue, Cohort, LocalQueue, ResourceFlavor


class QueueObjectAdmin(ClusterScopedAdmin):
    """A flavor or a cohort: saved by its service, deleted by the queues' one; its delete
    page says what the delete does before it asks (``admin/queues/delete_confirmation.html``)."""

    def delete(self, request: HttpRequest, obj: Any) -> None:
        services.delete_queue_object(actor=request.user, obj=obj, source="admin")

    def render_delete_form(self, request: HttpRequest, context: dict[str, Any]) -> HttpResponse:
        obj = context.get("object")
        if obj is not None:
            context["removal"] = removal.explain(obj)
            context["quota_moves"] = quota_moves(obj)
        return super().render_delete_form(request, context)


def quota_moves(obj: Any) -> list[str]:
    """What deleting a ClusterQueue does to quota: its nominal quotas go, and leave its
    cohort (the queues that borrow from it lose them)."""
    if not isinstance(obj, ClusterQueue):
        return []
    where = f" and leaves cohort {obj.cohort.name}" if obj.cohort is not None else ""
    return [
        f"{flavor} {resource}: the nominal quota of {format_quantity(value)} goes{where}."
        for (flavor, resource), value in obj.quota().items()
    ]


@admin.register(ResourceFlavor)
class ResourceFlavorAdmin(QueueObjectAdmin):
    list_display = ["name", "cluster", "node_labels", "topology_name"]
    list_filter = ["cluster"]
    search_fields = ["name"]

    def save(self, request: HttpRequest, obj: Any, form: Any) -> None:
        services.save_resource_flavor(actor=request.user, flavor=obj, source="admin")


@admin.register(Cohort)
class CohortAdmin(QueueObjectAdmin):
    list_display = ["name", "cluster", "parent", "fair_sharing_weight"]
    list_filter = ["cluster"]
    list_select_related = ["parent", "cluster"]
    search_fields = ["name"]

    def save(self, request: HttpRequest, obj: Any, form: Any) -> None:
        services.save_cohort(actor=request.user, cohort=obj, source="admin")


class LocalQueueInline(admin.TabularInline):
    model = LocalQueue
    extra = 0
    autocomplete_fields = ["namespace"]


class ClusterQueueForm(ClusterScopedForm):
    """A ClusterQueue with what the Queues page asks of a promise beyond the fleet."""

    promise_more_than_exists = forms.BooleanField(
        required=False,
        label="Promise more than exists",
        help_text="Save a raise that leaves the queues promising more than the nodes behind "
        "a flavor offer now.",
    )
    override_reason = forms.CharField(
        required=False,
        label="Reason to promise beyond the fleet",
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text="Why a quota is raised above what the nodes behind its flavor could ever "
        "offer, in any MIG layout (recorded with the save).",
    )


@admin.register(ClusterQueue)
class ClusterQueueAdmin(QueueObjectAdmin):
    form = ClusterQueueForm
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

    def save(self, request: HttpRequest, obj: Any, form: Any) -> None:
        services.save_cluster_queue(
            actor=request.user,
            cluster_queue=obj,
            source="admin",
            override_reason=form.cleaned_data.get("override_reason", ""),
            promise_more_than_exists=bool(form.cleaned_data.get("promise_more_than_exists")),
        )

    def save_inline(self, request: HttpRequest, parent: Any, formset: Any) -> None:
        save_rows(
            formset,
            save=lambda row: services.save_local_queue(
                actor=request.user, local_queue=row, source="admin"
            ),
            delete=lambda row: self.delete(request, row),
        )


@admin.register(LocalQueue)
class LocalQueueAdmin(ServiceAdmin):
    list_display = ["name", "namespace", "cluster_queue", "stop_policy"]
    list_filter = ["cluster_queue", "namespace__team", "stop_policy"]
    list_select_related = ["namespace", "cluster_queue"]
    search_fields = ["name", "namespace__name"]
    autocomplete_fields = ["namespace"]

    def get_readonly_fields(self, request: Any, obj: Any = None) -> Any:
        # Kueue makes spec.clusterQueue immutable: a LocalQueue is recreated, not retargeted.
        return ["cluster_queue"] if obj is not None else []

    def save(self, request: HttpRequest, obj: Any, form: Any) -> None:
        services.save_local_queue(actor=request.user, local_queue=obj, source="admin")

    def delete(self, request: HttpRequest, obj: Any) -> None:
        services.delete_queue_object(actor=request.user, obj=obj, source="admin")
