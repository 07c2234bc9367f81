"""The filters of the node-pool list (the API's ``/node-pools/``)."""

from __future__ import annotations

from fleet.models import NodePool
from portal.api_clusters import ClusterFilter
from portal.filters import StrictFilterSet


class NodePoolFilter(StrictFilterSet):
    cluster = ClusterFilter()

    class Meta:
        model = NodePool
        fields = ["cluster"]
