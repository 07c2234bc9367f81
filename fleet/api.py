"""REST API of the fleet's intent: node pools (read-only; admins edit them in the admin)."""

from __future__ import annotations

from rest_framework import serializers, viewsets

from fleet.models import NodePool


class NodePoolSerializer(serializers.ModelSerializer[NodePool]):
    class Meta:
        model = NodePool
        fields = ["name", "node_selector", "purpose", "mig_config", "description"]


class NodePoolViewSet(viewsets.ReadOnlyModelViewSet[NodePool]):
    serializer_class = NodePoolSerializer
    queryset = NodePool.objects.all()
    lookup_field = "name"
