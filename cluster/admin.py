"""What the loop observed and applied, in the admin: read-only (the poller and the applier
write it); and the base of every cluster-scoped object's admin."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.forms import ModelForm
from django.http import HttpRequest

from cluster.models import (
    AppliedObject,
    Drift,
    ObservedNode,
    ObservedObject,
    ObservedPod,
    SyncRun,
)
from cluster.scope import cluster_choice
from portal.admin import ReadOnlyAdmin, ServiceAdmin


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


class ClusterScopedForm(ModelForm):  # type: ignore[type-arg]
    """A cluster-scoped object's form: a name the chosen cluster already has is an error on
    the name (the same name on another cluster is another object)."""

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        cluster, name = data.get("cluster"), data.get("name")
        if cluster is not None and name:
            model = self._meta.model
            taken = model._default_manager.filter(cluster=cluster, name=name)  # type: ignore[union-attr]
            if taken.exclude(pk=self.instance.pk).exists():
                kind = model._meta.verbose_name  # type: ignore[union-attr]
                self.add_error("name", f"The cluster {cluster.name} already has a {kind} {name}.")
        return data


class ClusterScopedAdmin(ServiceAdmin):
    """An object of one cluster: its form asks which (at first the one the pages show, or
    the only one) and refuses a name taken on that cluster, on the name field; once made,
    it stays there (the service refuses a move)."""

    form = ClusterScopedForm

    def get_changeform_initial_data(self, request: HttpRequest) -> dict[str, Any]:
        initial = dict(super().get_changeform_initial_data(request))
        chosen = cluster_choice(request).chosen
        if chosen is not None and "cluster" not in initial:
            initial["cluster"] = chosen.pk
        return initial
