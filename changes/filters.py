"""The filters of the request lists: the same on the pages and in the API."""

from __future__ import annotations

from changes.models import MigChangeRequest, QuotaChangeRequest
from portal.filters import StrictFilterSet, TeamFilter
from portal.selectors import teams_seen_by


class MigChangeFilter(StrictFilterSet):
    team = TeamFilter(teams=teams_seen_by)

    class Meta:
        model = MigChangeRequest
        fields = ["team", "kind", "state", "verdict", "target_config"]


class QuotaRequestFilter(StrictFilterSet):
    team = TeamFilter(teams=teams_seen_by)

    class Meta:
        model = QuotaChangeRequest
        fields = ["team", "state", "kind"]
