"""The filters of the queue lists (the API's ``/local-queues/``)."""

from __future__ import annotations

from portal.filters import StrictFilterSet, TeamFilter
from queues.models import LocalQueue
from tenants.selectors import list_teams_for_user


class LocalQueueFilter(StrictFilterSet):
    team = TeamFilter(teams=list_teams_for_user, field_name="namespace__team")

    class Meta:
        model = LocalQueue
        fields = ["team"]
