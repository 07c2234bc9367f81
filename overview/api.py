"""REST API of the MIG layout planner: the plan (GET) and the MIG change requests it
becomes (POST, platform admins)."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import PermissionDenied, ValidationError
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from changes.api import MigChangeSerializer
from changes.planning import make_plan, may_see_planner, plan_for, request_planned_changes
from cluster.api_scope import CLUSTER_QUERY, ClusterQuery, ClusterScoped, cluster_input
from portal.api.safety import IDEMPOTENCY_KEY, IF_MATCH, StrictInput, idempotent
from tenants.models import Team


class PlanRequestSerializer(StrictInput, serializers.Serializer[Any]):
    cluster = cluster_input("plan")
    team = serializers.SlugField()
    reason = serializers.CharField(allow_blank=True)
    fingerprint = serializers.CharField(
        required=False,
        allow_blank=True,
        default="",
        help_text="The plan's fingerprint you read (or send it as If-Match, the ETag of GET).",
    )


class MigPlanView(ClusterScoped, APIView):
    """The MIG layout planner of one cluster (``/api/v1/clusters/<cluster>/mig-plan/``, or
    ``?cluster=`` on the flat route; with one cluster, that one): demand against capacity
    per resource, the proposed config of each node (before and after, the pods it evicts),
    the requests it becomes with their assessment and the ClusterQueue nominal changes that
    follow (platform admins, approvers and team leads; other teams' pods counted, never
    named)."""

    kind = "plan"

    @extend_schema(parameters=[CLUSTER_QUERY], responses={200: dict})
    def get(self, request: Request) -> Response:
        if not may_see_planner(request.user):
            raise PermissionDenied("The planner is for platform admins, approvers and team leads.")
        query = ClusterQuery(data=request.query_params, context={"user": request.user})
        query.is_valid(raise_exception=True)
        cluster = self.asked_cluster(query) or self.chosen_cluster(None)
        body = plan_for(request.user, make_plan(cluster))
        response = Response(body)
        response["ETag"] = f'"{body["fingerprint"]}"'
        return response

    @extend_schema(
        request=PlanRequestSerializer,
        responses={201: MigChangeSerializer(many=True)},
        parameters=[IF_MATCH, IDEMPOTENCY_KEY],
    )
    @idempotent
    def post(self, request: Request) -> Response:
        """Ask for the plan's MIG changes (platform admins): one request per pool and target
        config, pending approval. A plan that changed since you read it is a 409."""
        if not may_see_planner(request.user):
            raise PermissionDenied("The planner is for platform admins, approvers and team leads.")
        data = PlanRequestSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        seen = data.validated_data["fingerprint"] or request.headers.get("If-Match", "")
        seen = seen.strip().strip('"')
        if not seen:
            raise ValidationError(
                {"fingerprint": ["Send the fingerprint of the plan you read (or If-Match)."]}
            )
        team = Team.objects.filter(slug=data.validated_data["team"]).first()
        if team is None:
            raise ValidationError({"team": ["No such team."]})
        created = request_planned_changes(
            actor=request.user,
            cluster=self.chosen_cluster(data.validated_data.get("cluster")),
            team=team,
            reason=data.validated_data["reason"],
            seen=seen,
            source="api",
        )
        return Response(
            MigChangeSerializer(created, many=True, context={"request": request}).data,
            status=status.HTTP_201_CREATED,
        )
