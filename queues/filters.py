"""The filters of the queue lists (the API's ``/local-queues/``, ``/cluster-queues/``,
``/cohorts/`` and ``/resource-flavors/``)."""

from __future__ import annotations

from cluster.api_scope import ClusterFilter
from portal.api.filters import StrictFilterSet, TeamFilter
from queues.models import ClusterQueue, Cohort, LocalQueue, ResourceFlavor
from tenants.selectors import list_teams_for_user


class LocalQueueFilter(StrictFilterSet):
    cluster = ClusterFilter(field_name="namespace__cluster")
    team = TeamFilter(teams=list_teams_for_user, field_name="namespace__team")

    class Meta:
        model = LocalQueue
        fields = ["cluster", "team"]


class ClusterQueueFilter(StrictFilterSet):
    cluster = ClusterFilter()

    class Meta:
        model = ClusterQueue
        fields = ["cluster"]


class CohortFilter(StrictFilterSet):
    cluster = ClusterFilter()

    class Meta:
        model = Cohort
        fields = ["cluster"]


class ResourceFlavorFilter(StrictFilterSet):
    cluster = ClusterFilter()

    class Meta:
        model = ResourceFlavor
        fields = ["cluster"]
