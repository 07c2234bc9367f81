"""REST API of the fleet's intent: node pools (read-only; admins edit them in the admin)."""

from __future__ import annotations

from rest_framework import serializers, viewsets

from cluster.api_scope import ClusterScoped, cluster_field
from fleet.filters import NodePoolFilter
from fleet.models import NodePool


class NodePoolSerializer(serializers.ModelSerializer[NodePool]):
    cluster = cluster_field()

    class Meta:
        model = NodePool
        fields = [
            "name",
            "cluster",
            "node_selector",
            "purpose",
            "mig_config",
            "description",
            "idle_threshold_percent",
            "idle_period_minutes",
        ]


class NodePoolViewSet(ClusterScoped, viewsets.ReadOnlyModelViewSet[NodePool]):
    """Node pools, each on its cluster."""

    serializer_class = NodePoolSerializer
    queryset = NodePool.objects.select_related("cluster")
    lookup_field = "name"
    filterset_class = NodePoolFilter
    kind = "node pool"
