"""Admin for platform models, and the audited base class every app's admin uses."""

from __future__ import annotations

import json
from typing import Any

from django.contrib import admin
from django.db import models, transaction
from django.forms import JSONField as JSONFormField
from django.forms import ModelForm, Textarea
from django.http import HttpRequest

from portal import desired, removal
from portal.audit import record_audit
from portal.audit_events import admin_event
from portal.clusters import cluster_choice
from portal.models import AuditEvent, PlatformRole
from portal.services import snapshot


class IndentedJSONField(JSONFormField):
    """JSON edited as indented text: resource groups stay readable in the admin."""

    def prepare_value(self, value: Any) -> Any:
        if isinstance(value, str):
            return value
        return json.dumps(value, indent=2, ensure_ascii=False)


class AuditedAdmin(admin.ModelAdmin):
    """Records every admin save and delete in the audit log, in the same transaction."""

    formfield_overrides = {
        models.JSONField: {
            "form_class": IndentedJSONField,
            "widget": Textarea(attrs={"rows": 12, "cols": 80, "class": "vLargeTextField"}),
        }
    }

    def save_model(
        self, request: HttpRequest, obj: models.Model, form: ModelForm, change: bool
    ) -> None:
        old = previous = None
        if change:
            previous = type(obj)._default_manager.filter(pk=obj.pk).first()
            old = snapshot(previous) if previous is not None else None
        super().save_model(request, obj, form, change)
        desired.changed(*(row for row in (previous, obj) if row is not None))
        label = obj._meta.model_name
        record_audit(
            actor=request.user,
            event=admin_event(str(label), "changed" if change else "created"),
            source="admin",
            target=obj,
            team=self.team_of(obj),
            old=old,
            new=snapshot(obj),
        )

    @transaction.atomic
    def delete_model(self, request: HttpRequest, obj: models.Model) -> None:
        removal.removing(obj, actor=request.user, source="admin")  # requests about it end
        record_audit(
            actor=request.user,
            event=admin_event(str(obj._meta.model_name), "deleted"),
            source="admin",
            target=obj,
            team=self.team_of(obj),
            old=snapshot(obj),
        )
        super().delete_model(request, obj)
        desired.changed(obj)

    @transaction.atomic
    def delete_queryset(self, request: HttpRequest, queryset: Any) -> None:
        for obj in queryset:
            self.delete_model(request, obj)

    def team_of(self, obj: models.Model) -> Any:
        return None


class ReadOnlyAdmin(admin.ModelAdmin):
    """Observed state and records the portal keeps (polls, applies, steps): looked at, never
    edited by hand."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(PlatformRole)
class PlatformRoleAdmin(AuditedAdmin):
    list_display = ["user", "role"]
    list_filter = ["role"]
    search_fields = ["user__username"]


@admin.register(AuditEvent)
class AuditEventAdmin(ReadOnlyAdmin):
    """Read-only: the audit log is append-only."""

    list_display = ["time", "actor_name", "event", "team", "target_repr", "source"]
    list_filter = ["event", "source", "team"]
    search_fields = ["actor_name", "event", "target_repr"]
    date_hierarchy = "time"


admin.site.site_header = "Quartermaster administration"
admin.site.site_title = "Quartermaster admin"
admin.site.index_title = "Teams, quotas and queues"


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


class ClusterScopedAdmin(AuditedAdmin):
    """An object of one cluster: its form asks which (at first the one the pages show, or
    the only one) and refuses a name taken on that cluster, on the name field."""

    form = ClusterScopedForm

    def get_changeform_initial_data(self, request: HttpRequest) -> dict[str, Any]:
        initial = dict(super().get_changeform_initial_data(request))
        chosen = cluster_choice(request).chosen
        if chosen is not None and "cluster" not in initial:
            initial["cluster"] = chosen.pk
        return initial
