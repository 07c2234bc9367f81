"""The filters of the observed-node list (the API's ``/nodes/``)."""

from __future__ import annotations

import django_filters

from cluster.models import ObservedNode


class NodeFilter(django_filters.FilterSet):
    class Meta:
        model = ObservedNode
        fields = ["gpu_product", "mig_config", "mig_config_state", "pool_label", "unschedulable"]
