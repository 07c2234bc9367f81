"""The audit log's filters: the same on the Audit page and in the API."""

from __future__ import annotations

import django_filters
from django import forms

from portal.models import AuditEvent


class AuditEventFilter(django_filters.FilterSet):
    team = django_filters.CharFilter(field_name="team__slug", help_text="A team's slug.")
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
