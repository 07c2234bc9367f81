"""The filters of the observed-node list (the API's ``/nodes/``)."""

from __future__ import annotations

from cluster.api_scope import ClusterFilter
from cluster.models import ObservedNode
from portal.api.filters import StrictFilterSet


class NodeFilter(StrictFilterSet):
    cluster = ClusterFilter()

    class Meta:
        model = ObservedNode
        fields = [
            "cluster",
            "gpu_product",
            "mig_config",
            "mig_config_state",
            "pool_label",
            "unschedulable",
        ]
