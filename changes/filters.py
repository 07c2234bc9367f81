"""The filters of the request lists: the same on the pages and in the API."""

from __future__ import annotations

import django_filters
from drf_spectacular.utils import extend_schema_field

from changes.models import MigChangeRequest, QuotaChangeRequest
from cluster.models import Cluster
from portal.filters import StrictFilterSet, TeamFilter
from portal.selectors import teams_seen_by


@extend_schema_field(
    {"type": "string", "description": "A cluster's name: the requests on that cluster only."}
)
class ClusterNameFilter(django_filters.ModelChoiceFilter):
    """``?cluster=<name>``: the requests on that cluster (a name no cluster has is an error)."""

    def __init__(self, **kwargs: object) -> None:
        super().__init__(
            field_name="cluster",
            to_field_name="name",
            queryset=Cluster.objects.only("pk", "name"),
            **kwargs,
        )


class MigChangeFilter(StrictFilterSet):
    team = TeamFilter(teams=teams_seen_by)
    cluster = ClusterNameFilter()

    class Meta:
        model = MigChangeRequest
        fields = ["team", "cluster", "kind", "state", "verdict", "target_config"]


class QuotaRequestFilter(StrictFilterSet):
    team = TeamFilter(teams=teams_seen_by)
    cluster = ClusterNameFilter()

    class Meta:
        model = QuotaChangeRequest
        fields = ["team", "cluster", "state", "kind"]
