"""The filters of the request lists: the same on the pages and in the API."""

from __future__ import annotations

from changes.models import MigChangeRequest, QuotaChangeRequest
from cluster.api_scope import ClusterFilter
from portal.access.selectors import teams_seen_by
from portal.api.filters import StrictFilterSet, TeamFilter


class MigChangeFilter(StrictFilterSet):
    cluster = ClusterFilter()
    team = TeamFilter(teams=teams_seen_by)

    class Meta:
        model = MigChangeRequest
        fields = ["cluster", "team", "kind", "state", "verdict", "target_config"]


class QuotaRequestFilter(StrictFilterSet):
    cluster = ClusterFilter()
    team = TeamFilter(teams=teams_seen_by)

    class Meta:
        model = QuotaChangeRequest
        fields = ["cluster", "team", "state", "kind"]
