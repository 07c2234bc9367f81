"""REST API of GPU health: per node what its DCGM exporter last reported, and what needs
attention."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from cluster.api_scope import CLUSTER_QUERY, ClusterQuery, ClusterScoped, cluster_field
from health.selectors import health_for_user

LEVELS = ["ok", "info", "warning", "critical"]


class NodeHealthSerializer(serializers.Serializer[Any]):
    node = serializers.CharField()
    cluster = cluster_field(None)
    observed_at = serializers.DateTimeField()
    error = serializers.CharField(allow_blank=True)
    worst = serializers.ChoiceField(choices=LEVELS)
    findings = serializers.ListField(child=serializers.DictField())
    gpus = serializers.ListField(child=serializers.DictField())


class HealthQuery(ClusterQuery):
    node = serializers.CharField(required=False, max_length=253)
    worst = serializers.ChoiceField(choices=LEVELS, required=False)


class GpuHealthView(ClusterScoped, APIView):
    """GPU health per node from the DCGM exporters: utilisation, memory, temperature, power,
    the last Xid per GPU and per MIG instance, and what needs attention. Pods of other teams
    are not named (approvers and platform admins see every name)."""

    @extend_schema(
        parameters=[
            CLUSTER_QUERY,
            OpenApiParameter(
                "node",
                {"type": "string", "minLength": 1, "maxLength": 253},
                description="Only this node.",
            ),
            OpenApiParameter(
                "worst", str, enum=LEVELS, description="Only nodes whose worst finding is this."
            ),
        ],
        responses={200: NodeHealthSerializer(many=True)},
    )
    def get(self, request: Request) -> Response:
        query = HealthQuery(data=request.query_params, context={"user": request.user})
        query.is_valid(raise_exception=True)
        rows = health_for_user(
            request.user,
            node=query.validated_data.get("node", ""),
            worst=query.validated_data.get("worst", ""),
            cluster=self.asked_cluster(query),
        )
        return Response(rows)
