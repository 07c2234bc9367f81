"""The filters of the node-pool list (the API's ``/node-pools/``)."""

from __future__ import annotations

from cluster.api_scope import ClusterFilter
from fleet.models import NodePool
from portal.api.filters import StrictFilterSet


class NodePoolFilter(StrictFilterSet):
    cluster = ClusterFilter()

    class Meta:
        model = NodePool
        fields = ["cluster"]
