"""Teams, memberships, namespaces and the PriorityClass catalog in the admin: every write
through ``tenants.services`` (a namespace's quota and limits as a whole, from its page)."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.utils import unquote
from django.core.exceptions import PermissionDenied, ValidationError
from django.db.models import Count
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse

from cluster.admin import ClusterScopedAdmin, ClusterScopedForm
from portal.admin import ReadOnlyAdmin, ServiceAdmin, save_rows
from portal.vocabulary.errors import DomainError
from tenants import services
from tenants.models import LimitRangeItem, Membership, Namespace, PriorityClass, QuotaItem, Team
from tenants.rules import LimitSpec
from tenants.selectors import namespace_deletion


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 0
    autocomplete_fields = ["user"]


class NamespaceInline(admin.TabularInline):
    model = Namespace
    form = ClusterScopedForm
    extra = 0
    show_change_link = True
    can_delete = False  # a namespace is deleted on its own page, which asks to confirm


@admin.register(Team)
class TeamAdmin(ServiceAdmin):
    list_display = ["slug", "name", "namespace_count", "member_count"]
    search_fields = ["slug", "name"]
    filter_horizontal = ["allowed_priority_classes"]
    inlines = [MembershipInline, NamespaceInline]

    def get_queryset(self, request: Any) -> Any:
        return (
            super()
            .get_queryset(request)
            .annotate(
                _namespaces=Count("namespaces", distinct=True),
                _members=Count("memberships", distinct=True),
            )
        )

    @admin.display(description="namespaces", ordering="_namespaces")
    def namespace_count(self, team: Any) -> int:
        return int(team._namespaces)

    @admin.display(description="members", ordering="_members")
    def member_count(self, team: Any) -> int:
        return int(team._members)

    def save(self, request: HttpRequest, obj: Any, form: Any) -> None:
        services.save_team(
            actor=request.user,
            team=obj,
            source="admin",
            allowed_priority_classes=form.cleaned_data.get("allowed_priority_classes"),
        )

    def delete(self, request: HttpRequest, obj: Any) -> None:
        services.delete_tenant_object(actor=request.user, obj=obj, source="admin")

    def save_inline(self, request: HttpRequest, parent: Any, formset: Any) -> None:
        if formset.model is Membership:
            save_rows(
                formset,
                save=lambda row: services.save_membership(
                    actor=request.user, membership=row, source="admin"
                ),
                delete=lambda row: self.delete(request, row),
            )
        else:  # namespaces: added or changed here, deleted on their own page
            save_rows(
                formset,
                save=lambda row: services.save_namespace(
                    actor=request.user, namespace=row, source="admin"
                ),
                delete=None,
            )


@admin.register(Membership)
class MembershipAdmin(ServiceAdmin):
    list_display = ["user", "team", "role"]
    list_filter = ["role", "team"]
    search_fields = ["user__username", "team__slug"]
    autocomplete_fields = ["user", "team"]

    def save(self, request: HttpRequest, obj: Any, form: Any) -> None:
        services.save_membership(actor=request.user, membership=obj, source="admin")

    def delete(self, request: HttpRequest, obj: Any) -> None:
        services.delete_tenant_object(actor=request.user, obj=obj, source="admin")


class QuotaItemInline(admin.TabularInline):
    model = QuotaItem
    extra = 1


class LimitRangeItemInline(admin.TabularInline):
    model = LimitRangeItem
    extra = 0


class NamespaceForm(ClusterScopedForm):
    """A namespace with the reason its quota may exceed what the fleet could ever offer."""

    override_reason = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text="Only to raise a GPU quota above what the fleet could ever offer: why "
        "(recorded with the change).",
    )


@admin.register(Namespace)
class NamespaceAdmin(ClusterScopedAdmin):
    form = NamespaceForm
    list_display = ["name", "cluster", "team"]
    list_filter = ["cluster", "team"]
    search_fields = ["name", "team__slug"]
    list_select_related = ["team", "cluster"]
    inlines = [QuotaItemInline, LimitRangeItemInline]
    delete_confirmation_template = "admin/tenants/namespace/delete_confirmation.html"

    def save(self, request: HttpRequest, obj: Any, form: Any) -> None:
        services.save_namespace(actor=request.user, namespace=obj, source="admin")

    def delete(self, request: HttpRequest, obj: Any) -> None:
        services.delete_namespace(actor=request.user, namespace=obj, source="admin")

    def save_inline(self, request: HttpRequest, parent: Any, formset: Any) -> None:
        """The namespace's quota (or limits) replaced as a whole, as on every other door:
        checked together, one audit row."""
        kept = [
            f.cleaned_data
            for f in formset.forms
            if f.cleaned_data and not formset._should_delete_form(f)
        ]
        if formset.model is QuotaItem:
            warnings = services.set_namespace_quota(
                actor=request.user,
                namespace=parent,
                hard={row["resource"]: row["hard"] for row in kept},
                source="admin",
                override_reason=request.POST.get("override_reason", ""),
            )
        else:
            fields = ("limit_type", "resource", "default", "default_request", "max", "min")
            warnings = services.set_namespace_limits(
                actor=request.user,
                namespace=parent,
                limits=[LimitSpec(**{k: row.get(k) or "" for k in fields}) for row in kept],
                source="admin",
            )
        for warning in warnings:
            messages.warning(request, warning)

    def get_actions(self, request: HttpRequest) -> dict[str, Any]:
        actions = super().get_actions(request)
        actions.pop("delete_selected", None)  # one at a time, each confirmed by its name
        return actions

    def delete_view(
        self, request: HttpRequest, object_id: str, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        """What the delete removes from the cluster and keeps in the history; it happens
        only when the namespace's name is typed and the namespace is still the version the
        page showed (else the page answers again, with why, and nothing changes)."""
        namespace = self.get_object(request, unquote(object_id))
        if namespace is None:
            return _gone(request)
        if not self.has_delete_permission(request, namespace):
            raise PermissionDenied
        error, field_error, status = "", "", 200
        if request.method == "POST":
            try:
                services.delete_namespace_confirmed(
                    actor=request.user,
                    namespace_id=namespace.pk,
                    typed_name=request.POST.get("confirm_name", ""),
                    version=request.POST.get("version", ""),
                    source="admin",
                )
            except ValidationError as exc:
                field_error, status = " ".join(exc.message_dict["confirm_name"]), 422
            except DomainError as exc:
                error, status = exc.message, 409
                namespace = self.get_object(request, unquote(object_id))
                if namespace is None:
                    return _gone(request)
            else:  # the audit log records it (with the cancelled requests)
                messages.success(request, f"Namespace {namespace.name} deleted.")
                return HttpResponseRedirect(reverse("admin:tenants_namespace_changelist"))
        context = {
            **self.admin_site.each_context(request),
            "title": f"Delete namespace {namespace.name}?",
            "subtitle": None,
            "object": namespace,
            "opts": self.opts,
            "app_label": self.opts.app_label,
            "deletion": namespace_deletion(namespace),
            "error": error,
            "field_error": field_error,
            "typed": request.POST.get("confirm_name", "") if not error else "",
            **(extra_context or {}),
        }
        return TemplateResponse(
            request, self.delete_confirmation_template or "", context, status=status
        )


def _gone(request: HttpRequest) -> HttpResponse:
    messages.warning(request, "This namespace does not exist (any more).")
    return HttpResponseRedirect(reverse("admin:tenants_namespace_changelist"))


@admin.register(QuotaItem)
class QuotaItemAdmin(ReadOnlyAdmin):
    """Looked at here, edited on the namespace's page (its quota checked and audited as a
    whole)."""

    list_display = ["namespace", "resource", "hard", "warning"]
    list_filter = ["namespace__team", "resource"]
    search_fields = ["namespace__name", "resource"]
    list_select_related = ["namespace"]

    @admin.display(description="note")
    def warning(self, item: QuotaItem) -> str:
        return " ".join(item.warnings)


@admin.register(LimitRangeItem)
class LimitRangeItemAdmin(ReadOnlyAdmin):
    """Looked at here, edited on the namespace's page (its limits checked and audited as a
    whole)."""

    list_display = [
        "namespace",
        "limit_type",
        "resource",
        "default",
        "default_request",
        "max",
        "min",
    ]
    list_filter = ["namespace__team", "limit_type"]
    search_fields = ["namespace__name", "resource"]
    list_select_related = ["namespace"]


@admin.register(PriorityClass)
class PriorityClassAdmin(ServiceAdmin):
    list_display = ["name", "value", "preemption_policy", "global_default"]
    list_filter = ["preemption_policy", "global_default"]
    search_fields = ["name"]

    def save(self, request: HttpRequest, obj: Any, form: Any) -> None:
        services.save_priority_class(
            actor=request.user,
            priority_class=obj,
            source="admin",
            clusters=form.cleaned_data.get("clusters"),
        )

    def delete(self, request: HttpRequest, obj: Any) -> None:
        services.delete_tenant_object(actor=request.user, obj=obj, source="admin")
