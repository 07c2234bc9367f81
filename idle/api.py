"""Idle GPUs over the REST API: the same rows as the page (your teams'; every team's for
platform admins and approvers)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from cluster.models import Cluster
from idle.selectors import rows_of, spells_for, team_seen_by
from portal.api.safety import StrictQuery


class IdleQuery(StrictQuery):
    team = serializers.CharField(required=False, default="", max_length=63)
    cluster = serializers.CharField(required=False, default="", max_length=63)


class IdleRowSerializer(serializers.Serializer[Any]):
    id = serializers.IntegerField(source="spell.pk")
    cluster = serializers.CharField(source="spell.cluster.name")
    team = serializers.CharField(source="spell.team.slug", allow_null=True, default=None)
    namespace = serializers.CharField(source="spell.namespace")
    workload = serializers.CharField(source="spell.workload")
    pod = serializers.CharField(source="spell.pod")
    pods = serializers.IntegerField(source="spell.pods")
    pool = serializers.CharField(source="spell.pool")
    gpus = serializers.FloatField(source="spell.gpus")
    threshold_percent = serializers.FloatField(source="spell.threshold")
    idle_since = serializers.DateTimeField(source="spell.idle_since")
    found_at = serializers.DateTimeField(source="spell.found_at")
    last_read = serializers.DateTimeField(source="spell.last_seen")
    ended_at = serializers.DateTimeField(source="spell.ended_at")
    suspended_at = serializers.DateTimeField(source="spell.suspended_at")
    note = serializers.CharField(source="spell.note")
    state = serializers.CharField()
    gpu_hours = serializers.FloatField(help_text="GPU-hours wasted so far.")
    cost = serializers.CharField(
        source="money",
        allow_null=True,
        help_text="What those GPU-hours cost, to the cent, each day's hours at the price that "
        "held then (null: no price is set for them).",
    )
    currency = serializers.CharField(help_text="The cost policy's currency.")
    devices = serializers.JSONField(source="spell.devices")


class IdleView(APIView):
    """Idle workloads and pods (open, and ended in the last day) with the GPU-hours they have
    wasted so far and what they cost: your teams' (approvers and platform admins: every
    team's). ``team``: one of them (another is a 404); ``cluster``: one cluster."""

    @extend_schema(
        parameters=[
            OpenApiParameter("team", str, description="One of your teams (its slug)."),
            OpenApiParameter("cluster", str, description="One cluster (its name)."),
        ],
        responses=IdleRowSerializer(many=True),
    )
    def get(self, request: Request) -> Response:
        query = IdleQuery(data=request.query_params)
        query.is_valid(raise_exception=True)
        data = query.validated_data
        team = team_seen_by(request.user, data["team"]) if data["team"] else None
        cluster = None
        if data["cluster"]:
            cluster = Cluster.objects.filter(name=data["cluster"]).first()
            if cluster is None:
                raise ValidationError({"cluster": f"No cluster is named {data['cluster']!r}."})
        rows = rows_of(spells_for(request.user, team=team, cluster=cluster))
        return Response(IdleRowSerializer(rows, many=True).data)
