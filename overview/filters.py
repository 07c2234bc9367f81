"""The filters of the Workloads list, one FilterSet for the page and the API
(``/workloads/`` and ``/api/v1/workloads/``): a value a filter cannot take is a field
error naming it, never ignored."""

from __future__ import annotations

from typing import Any

import django_filters
from django import forms
from django.db.models import QuerySet
from drf_spectacular.utils import extend_schema_field

from cluster.api_scope import ClusterFilter
from cluster.models import ObservedWorkload
from overview.workloads import (
    STATE_ALIASES,
    STATE_WHERE,
    STATES,
    in_cluster_queue,
    in_team,
    search,
)
from portal.access.selectors import teams_seen_by
from portal.api.filters import StrictFilterSet, TeamFilter

INT32 = 2**31 - 1  # Kubernetes' priorities are 32-bit integers


@extend_schema_field(
    {
        "type": "integer",
        "minimum": -INT32 - 1,
        "maximum": INT32,
        "description": "Only workloads of this priority (a whole number).",
    }
)
class PriorityFilter(django_filters.NumberFilter):
    """A whole number within Kubernetes' priorities (another is a field error)."""

    field_class = forms.IntegerField


class WorkloadFilter(StrictFilterSet):
    cluster = ClusterFilter()
    team = TeamFilter(
        teams=teams_seen_by, method="by_team", help_text="A team's slug: its namespaces' workloads."
    )
    namespace = django_filters.CharFilter(max_length=63, help_text="A namespace's name.")
    local_queue = django_filters.CharFilter(
        field_name="queue_name", max_length=63, help_text="The LocalQueue it was sent to."
    )
    cluster_queue = django_filters.CharFilter(
        method="by_cluster_queue",
        max_length=253,
        help_text="The ClusterQueue it is in (holding quota there, or waiting in a LocalQueue "
        "that points at it).",
    )
    state = django_filters.ChoiceFilter(
        choices=[*STATES, ("pending", "Pending (Kueue's word for waiting)")],
        method="by_state",
        error_messages={
            "invalid_choice": "Use waiting (or Kueue's pending), admitted, evicted or finished."
        },
        help_text="waiting (in line; pending, Kueue's word, means the same), admitted, "
        "evicted (and not admitted again since) or finished.",
    )
    priority = PriorityFilter(min_value=-INT32 - 1, max_value=INT32)
    q = django_filters.CharFilter(
        method="by_text", max_length=253, help_text="Part of its name or namespace (any case)."
    )

    class Meta:
        model = ObservedWorkload
        fields = [
            "cluster",
            "team",
            "namespace",
            "local_queue",
            "cluster_queue",
            "state",
            "priority",
            "q",
        ]

    def by_team(self, rows: QuerySet[Any], name: str, value: Any) -> QuerySet[Any]:
        return in_team(rows, value.slug) if value else rows

    def by_cluster_queue(self, rows: QuerySet[Any], name: str, value: str) -> QuerySet[Any]:
        return in_cluster_queue(rows, value) if value else rows

    def by_state(self, rows: QuerySet[Any], name: str, value: str) -> QuerySet[Any]:
        return rows.filter(STATE_WHERE[STATE_ALIASES.get(value, value)]) if value else rows

    def by_text(self, rows: QuerySet[Any], name: str, value: str) -> QuerySet[Any]:
        return search(rows, value)
