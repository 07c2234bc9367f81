"""Admin for platform models, and the base classes every app's admin uses: one whose every
write goes through the app's service (:class:`ServiceAdmin`), one for what is only looked at
(:class:`ReadOnlyAdmin`)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from django.contrib import admin
from django.contrib import messages as admin_messages
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import models, transaction
from django.forms import BaseModelFormSet, ModelForm, Textarea
from django.forms import JSONField as JSONFormField
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import reverse

from portal.access.roles import grant_platform_role, revoke_platform_role
from portal.models import AuditEvent, PlatformRole


class IndentedJSONField(JSONFormField):
    """JSON edited as indented text: resource groups stay readable in the admin."""

    def prepare_value(self, value: Any) -> Any:
        if isinstance(value, str):
            return value
        return json.dumps(value, indent=2, ensure_ascii=False)


JSON_AS_TEXT: dict[type[models.Field[Any, Any]], dict[str, Any]] = {
    models.JSONField: {
        "form_class": IndentedJSONField,
        "widget": Textarea(attrs={"rows": 12, "cols": 80, "class": "vLargeTextField"}),
    }
}


# Where a change form keeps the refusal of its first try while it is shown again.
_REFUSED = "_quartermaster_refused"


class ServiceAdmin(admin.ModelAdmin):
    """An object of intent (desired state) in the admin: every write goes through the app's
    service, as from the pages, the API, the tasks and the demo loader: permission,
    validation, confirmations, one audit row per change (source ``admin``), the loop told on
    commit. Inline rows too (:meth:`save_inline`). A service's refusal rolls the whole save
    back and the form is shown again with its errors: on the field it names, else at the
    top (an inline item's, prefixed with its key)."""

    formfield_overrides = JSON_AS_TEXT

    def save(self, request: HttpRequest, obj: Any, form: ModelForm) -> None:
        """Write ``obj`` (the form's edit, not saved) through the app's service."""
        raise NotImplementedError

    def delete(self, request: HttpRequest, obj: Any) -> None:
        """Delete ``obj`` through the app's service."""
        raise NotImplementedError

    def save_inline(self, request: HttpRequest, parent: Any, formset: BaseModelFormSet) -> None:  # type: ignore[type-arg]
        """Write one inline's edits through the app's service (an admin with inlines says
        how)."""
        raise NotImplementedError

    def save_model(self, request: HttpRequest, obj: Any, form: ModelForm, change: bool) -> None:
        self.save(request, obj, form)

    def save_related(
        self, request: HttpRequest, form: ModelForm, formsets: Any, change: bool
    ) -> None:
        # No form.save_m2m(): a service writes the many-to-many fields it owns, audited.
        for formset in formsets:
            formset.save(commit=False)  # what changed, for the history's message: no write
            if formset.has_changed():
                self.save_inline(request, form.instance, formset)

    def delete_model(self, request: HttpRequest, obj: Any) -> None:
        self.delete(request, obj)

    @transaction.atomic
    def delete_queryset(self, request: HttpRequest, queryset: Any) -> None:
        for obj in queryset:
            self.delete(request, obj)

    def changeform_view(
        self,
        request: HttpRequest,
        object_id: str | None = None,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        """The change form; a save a service refused (rolled back whole: the admin's
        transaction) is answered with the same form and the service's errors on it."""
        try:
            return super().changeform_view(request, object_id, form_url, extra_context)
        except ValidationError as refused:
            if request.method != "POST" or hasattr(request, _REFUSED):
                raise
            setattr(request, _REFUSED, refused)
            return super().changeform_view(request, object_id, form_url, extra_context)

    def get_form(
        self, request: HttpRequest, obj: Any = None, change: bool = False, **kwargs: Any
    ) -> Any:
        form = super().get_form(request, obj, change, **kwargs)
        refused = getattr(request, _REFUSED, None)
        return form if refused is None else refusing(form, refused)


def refusing(form: type[ModelForm], refused: ValidationError) -> type[ModelForm]:  # type: ignore[type-arg]
    """``form`` that shows a service's refusal of the same data: each message on the field
    it names, or at the top with its key when the form has no such field."""

    class Refused(form):  # type: ignore[valid-type,misc]
        def _post_clean(self) -> None:
            super()._post_clean()
            by_field = refused.message_dict if hasattr(refused, "error_dict") else {}
            for message in [] if by_field else refused.messages:
                self.add_error(None, message)
            for field, messages in by_field.items():
                if field in self.fields and field not in self.errors:
                    self.add_error(field, messages)
                elif field not in self.fields:
                    shown = field != "__all__"
                    self.add_error(None, [f"{field}: {m}" if shown else m for m in messages])

    Refused.__name__ = form.__name__
    return Refused


def save_rows(
    formset: BaseModelFormSet,  # type: ignore[type-arg]
    *,
    save: Callable[[Any], object],
    delete: Callable[[Any], object] | None,
) -> None:
    """An inline's rows one by one through a service, as its ``save(commit=False)`` found
    them: ``delete(row)`` for each ticked for deletion (an inline without ``delete``
    deletes nothing), ``save(row)`` for each added or changed."""
    if delete is not None:
        for row in formset.deleted_objects:
            delete(row)
    for row in [*formset.new_objects, *(row for row, _ in formset.changed_objects)]:
        save(row)


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
class PlatformRoleAdmin(ServiceAdmin):
    """Roles are granted and revoked through ``portal.access.roles``, never edited: a role
    is added (granted) or deleted (revoked), one at a time; a refusal is shown with nothing
    written."""

    list_display = ["user", "role", "granted_by"]
    list_filter = ["role", "granted_by"]
    search_fields = ["user__username"]
    fields = ["user", "role"]

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return obj is None and super().has_change_permission(request, obj)

    def get_actions(self, request: HttpRequest) -> dict[str, Any]:
        actions = super().get_actions(request)
        actions.pop("delete_selected", None)  # one at a time, each checked by the service
        return actions

    def save(self, request: HttpRequest, obj: Any, form: ModelForm) -> None:
        if obj.pk is not None:
            raise PermissionDenied("A platform role is granted or revoked, never edited.")
        grant_platform_role(
            actor=request.user, user=getattr(obj, "user", None), role=obj.role, source="admin"
        )

    def delete(self, request: HttpRequest, obj: Any) -> None:
        revoke_platform_role(actor=request.user, platform_role=obj, source="admin")

    def delete_view(
        self, request: HttpRequest, object_id: str, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        """The delete confirmation; a revoke the service refused (rolled back whole) goes
        back to the role's page with the service's words."""
        try:
            return super().delete_view(request, object_id, extra_context)
        except ValidationError as refused:
            for message in refused.messages:
                admin_messages.error(request, message)
            return HttpResponseRedirect(
                reverse("admin:portal_platformrole_change", args=[object_id])
            )


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
