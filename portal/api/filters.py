"""Filters shared by the pages and the API: the audit log's, and the strict pieces every
list uses (a team among yours, a true/false, an ordering by a known field). A value the
filter cannot take is a field error naming the filter and what it takes, never ignored."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import django_filters
from django import forms
from django.contrib.auth.models import AnonymousUser
from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import QuerySet
from django_filters.rest_framework import DjangoFilterBackend
from drf_spectacular.utils import extend_schema_field
from rest_framework import filters as drf_filters
from rest_framework import serializers
from rest_framework.request import Request

from portal.access.selectors import teams_seen_by
from portal.api.safety import repeated_or_empty
from portal.models import AuditEvent

SHOWN_CHOICES = 10  # an error names at most this many allowed values


def allowed(values: list[str]) -> str:
    shown = ", ".join(values[:SHOWN_CHOICES])
    return shown + (
        f" (and {len(values) - SHOWN_CHOICES} more)" if len(values) > SHOWN_CHOICES else ""
    )


def no_such_team(slugs: list[str]) -> str:
    """The one answer to a team slug that is not among yours (whether it exists or not)."""
    if not slugs:
        return "No such team: you are in no team."
    return f"No such team among yours: use one of {allowed(slugs)}."


class TeamChoiceField(forms.ModelChoiceField):  # type: ignore[type-arg]
    """A team slug among the given teams; any other (no such team, or one you may not see)
    earns the same error, naming the slugs that would do."""

    def to_python(self, value: Any) -> Any:
        try:
            return super().to_python(value)
        except ValidationError:
            slugs = list(self.queryset.values_list("slug", flat=True))  # type: ignore[union-attr]
            raise ValidationError(no_such_team(slugs), code="invalid_choice") from None


@extend_schema_field(
    {
        "type": "string",
        "description": "One of the teams whose rows this list shows you, by slug; any other "
        "slug is a 400 naming `team` and the teams that would do, whether it exists or not.",
    }
)
class TeamFilter(django_filters.ModelChoiceFilter):
    """``?team=<slug>`` among the teams ``teams(user)`` returns for the asking user (the
    FilterSet needs ``request``: without it no team is allowed)."""

    field_class = TeamChoiceField

    def __init__(
        self, *, teams: Callable[[Any], QuerySet[Any]], field_name: str = "team", **kwargs: Any
    ) -> None:
        def scope(request: Request | None) -> QuerySet[Any]:
            user = getattr(request, "user", None) or AnonymousUser()
            return teams(user).prefetch_related(None).only("pk", "slug").order_by("slug")

        super().__init__(field_name=field_name, to_field_name="slug", queryset=scope, **kwargs)


class StrictBooleanField(forms.Field):
    """``true`` or ``false`` (empty: no filter); anything else is an error."""

    def to_python(self, value: Any) -> bool | None:
        if value in (None, ""):
            return None
        if value in ("true", "false"):
            return bool(value == "true")
        raise ValidationError("Use true or false.", code="invalid")


class BooleanFilter(django_filters.BooleanFilter):
    field_class = StrictBooleanField


class StrictFilterSet(django_filters.FilterSet):
    """A FilterSet whose model booleans take only ``true`` or ``false`` (every list's)."""

    FILTER_DEFAULTS = {
        **django_filters.FilterSet.FILTER_DEFAULTS,
        models.BooleanField: {"filter_class": BooleanFilter},
    }


class OrderingFilter(drf_filters.OrderingFilter):
    """``?ordering=`` by the fields the list offers (``-`` for descending, comma-separated);
    an unknown field is a 400 naming ``ordering`` and the fields, never ignored. By default
    a list offers the columns it shows that are plain columns of its model (no relation
    across many rows, no computed value)."""

    def get_default_valid_fields(
        self, queryset: Any, view: Any, context: Mapping[str, Any] | None = None
    ) -> list[tuple[str, str]]:
        model = getattr(queryset, "model", None) or _view_model(view)
        serializer_class = getattr(view, "serializer_class", None)
        if model is None or serializer_class is None:
            return []
        concrete = {
            field.name
            for field in model._meta.get_fields()
            if getattr(field, "concrete", False) and not field.many_to_many
        }
        return [
            (name, str(field.label or name))
            for name, field in serializer_class().fields.items()
            if name in concrete and field.source == name
        ]

    def get_ordering(self, request: Request, queryset: Any, view: Any) -> Any:
        values = request.query_params.getlist(self.ordering_param)
        if not values:
            return self.get_default_ordering(view)
        valid = sorted(
            name for name, _ in self.get_valid_fields(queryset, view, {"request": request})
        )
        terms = [term.strip() for term in values[0].split(",")] if len(values) == 1 else []
        if not terms or any(term.removeprefix("-") not in valid for term in terms):
            raise serializers.ValidationError(
                {
                    self.ordering_param: [
                        f"Order by {allowed(valid)} (a leading - for descending; several "
                        "comma-separated)."
                        if valid
                        else "This list has no ordering to choose."
                    ]
                }
            )
        return terms

    def get_schema_operation_parameters(self, view: Any) -> list[dict[str, Any]]:
        model = _view_model(view)
        queryset: Any = model.objects.none() if model else None
        fields = self.get_valid_fields(queryset, view, {})
        names = sorted(name for name, _ in fields)
        if not names:
            return []
        term = "-?(" + "|".join(names) + ")"
        return [
            {
                "name": self.ordering_param,
                "required": False,
                "in": "query",
                "description": f"Order by {', '.join(names)} (a leading - for descending; "
                "several comma-separated). Another field is a 400 naming `ordering`.",
                "schema": {"type": "string", "pattern": f"^{term}(,{term})*$"},
            }
        ]


class FilterBackend(DjangoFilterBackend):
    """django-filter's backend, strict: each filter parameter sent once and with a value
    (``?state=`` or ``?state=a&state=b`` is a 400 naming it), booleans only ``true`` or
    ``false``, and any value a filter cannot take a 400 naming the filter."""

    filterset_base = StrictFilterSet

    def filter_queryset(self, request: Request, queryset: Any, view: Any) -> Any:
        filterset_class = self.get_filterset_class(view, queryset)
        if filterset_class is not None:
            errors = repeated_or_empty(request.query_params, filterset_class.base_filters)
            if errors:
                raise serializers.ValidationError(errors)
        return super().filter_queryset(request, queryset, view)


def _view_model(view: Any) -> Any:
    serializer_class = getattr(view, "serializer_class", None)
    meta = getattr(serializer_class, "Meta", None)
    return getattr(meta, "model", None)


class AuditEventFilter(StrictFilterSet):
    team = TeamFilter(teams=teams_seen_by, help_text="A team's slug.")
    event = django_filters.CharFilter(
        lookup_expr="startswith", help_text="Events starting with this, e.g. mig_change."
    )
    actor = django_filters.CharFilter(field_name="actor_name", help_text="Who, e.g. lead-a.")
    source = django_filters.ChoiceFilter(
        choices=AuditEvent.Source.choices,
        error_messages={"invalid_choice": "Pick one of the listed sources."},
    )
    request = django_filters.CharFilter(
        field_name="request_id", help_text="Every event of one request (its X-Request-ID)."
    )
    since = django_filters.DateFilter(
        field_name="time",
        lookup_expr="date__gte",
        input_formats=["%Y-%m-%d"],
        widget=forms.DateInput(attrs={"type": "date"}),
        error_messages={"invalid": "A day as YYYY-MM-DD."},
        help_text="Events on or after this day (YYYY-MM-DD).",
    )

    class Meta:
        model = AuditEvent
        fields = ["team", "event", "actor", "source", "request", "since"]
