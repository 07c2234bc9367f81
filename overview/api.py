"""REST API of the MIG layout planner: the plan (GET) and the MIG change requests it
becomes (POST, platform admins)."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import PermissionDenied, ValidationError
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from changes.api import MigChangeSerializer
from changes.planning import make_plan, may_see_planner, plan_for, request_planned_changes
from cluster.api_scope import CLUSTER_QUERY, ClusterQuery, ClusterScoped, cluster_input
from overview.onboarding import (
    NamespacePlan,
    Offboarding,
    OnboardingPlan,
    offboard_team,
    offboarding_of,
    onboard_team,
)
from portal.api.safety import IDEMPOTENCY_KEY, IF_MATCH, StrictInput, idempotent
from portal.services import require_platform_admin
from portal.vocabulary.errors import DomainError
from tenants.models import Team
from tenants.rules import LimitSpec


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


class LimitInput(StrictInput, serializers.Serializer[Any]):
    limit_type = serializers.ChoiceField(choices=["Container", "Pod"])
    resource = serializers.CharField()
    default = serializers.CharField(required=False, allow_blank=True, default="")
    default_request = serializers.CharField(required=False, allow_blank=True, default="")
    max = serializers.CharField(required=False, allow_blank=True, default="")
    min = serializers.CharField(required=False, allow_blank=True, default="")


class NamespaceInput(StrictInput, serializers.Serializer[Any]):
    name = serializers.CharField()
    hard = serializers.DictField(
        child=serializers.CharField(),
        required=False,
        default=dict,
        help_text='ResourceQuota hard items, e.g. {"requests.nvidia.com/gpu": "4"}.',
    )
    limits = LimitInput(many=True, required=False, default=list)
    local_queues = serializers.DictField(
        child=serializers.CharField(),
        required=False,
        default=dict,
        help_text="LocalQueue name -> the existing ClusterQueue it points at.",
    )


class OnboardingInput(StrictInput, serializers.Serializer[Any]):
    slug = serializers.CharField(help_text="The team's slug (a DNS label).")
    name = serializers.CharField()
    description = serializers.CharField(required=False, allow_blank=True, default="")
    cluster = serializers.CharField(help_text="The cluster its namespaces live on.")
    namespaces = NamespaceInput(many=True, required=False, default=list)
    members = serializers.DictField(
        child=serializers.ChoiceField(choices=["lead", "member", "viewer"]),
        required=False,
        default=dict,
        help_text="Username -> team role.",
    )


class OnboardedSerializer(serializers.Serializer[Any]):
    team = serializers.CharField(source="team.slug")
    dry_run = serializers.BooleanField()
    story = serializers.CharField(help_text="The request id the onboarding's audit rows share.")
    warnings = serializers.ListField(child=serializers.CharField())
    manifests = serializers.ListField(child=serializers.DictField())
    yaml = serializers.CharField()


def plan_from(data: dict[str, Any]) -> OnboardingPlan:
    """An onboarding plan from validated input (the API's and the page's)."""
    return OnboardingPlan(
        slug=data["slug"],
        name=data["name"],
        description=data.get("description", ""),
        cluster=data["cluster"],
        namespaces=[
            NamespacePlan(
                name=ns["name"],
                hard=dict(ns.get("hard") or {}),
                limits=[LimitSpec(**item) for item in ns.get("limits") or []],
                local_queues=dict(ns.get("local_queues") or {}),
            )
            for ns in data.get("namespaces") or []
        ],
        members=dict(data.get("members") or {}),
    )


DRY_RUN = OpenApiParameter(
    "dry_run",
    bool,
    description="true: check every step and render the objects, write nothing.",
    required=False,
)


class OnboardingView(APIView):
    """Onboard a team in one request (platform admins): the team, its namespaces on one
    cluster with their ResourceQuota, LimitRange and LocalQueues (on existing
    ClusterQueues), and its members. All or nothing; each refused field named where it was
    given (``namespaces[0].hard[requests.nvidia.com/gpu]``). ``?dry_run=true`` answers the
    objects the cluster loop would apply and the rules' warnings, writing nothing. The
    audit rows of one onboarding share its request id (``story``)."""

    @extend_schema(
        request=OnboardingInput,
        responses={200: OnboardedSerializer, 201: OnboardedSerializer},
        parameters=[DRY_RUN],
    )
    def post(self, request: Request) -> Response:
        dry = DryRunQuery(data=request.query_params)
        dry.is_valid(raise_exception=True)
        data = OnboardingInput(data=request.data)
        data.is_valid(raise_exception=True)
        done = onboard_team(
            actor=request.user,
            plan=plan_from(data.validated_data),
            source="api",
            dry_run=dry.validated_data["dry_run"],
        )
        return Response(
            OnboardedSerializer(done).data,
            status=status.HTTP_200_OK if done.dry_run else status.HTTP_201_CREATED,
        )


class DryRunQuery(serializers.Serializer[Any]):
    dry_run = serializers.BooleanField(required=False, default=False)


class OffboardInput(StrictInput, serializers.Serializer[Any]):
    confirm_slug = serializers.CharField(
        required=False,
        allow_blank=True,
        default="",
        help_text="The team's slug, typed again: required to offboard (not for a dry run).",
    )
    version = serializers.CharField(
        required=False,
        allow_blank=True,
        default="",
        help_text="The version a dry run answered (or send it as If-Match, its ETag).",
    )


def offboarding_body(what: Offboarding) -> dict[str, Any]:
    """What offboarding removes from the clusters and what history stays, in the words of
    the offboarding page, and the objects by name."""
    return {
        "team": what.team.slug,
        "version": what.version,
        "removes": {
            "namespaces": [
                {
                    "name": ns.name,
                    "cluster": ns.cluster.name,
                    "quota": {q.resource: q.hard for q in ns.quota_items.all()},
                    "limits": len(ns.limit_items.all()),
                }
                for ns in what.namespaces
            ],
            "local_queues": [
                {
                    "name": lq.name,
                    "namespace": lq.namespace.name,
                    "cluster_queue": lq.cluster_queue.name,
                }
                for lq in what.local_queues
            ],
            "members": [{"user": m.user.get_username(), "role": m.role} for m in what.members],
            "said": [line for d in what.deletions for line in d.cluster],
        },
        "keeps": {
            "audit_rows": what.audit_rows,
            "usage_rows": what.usage_rows,
            "said": [
                f"The audit log: {what.audit_rows} rows about this team, under its name.",
                f"Usage history: {what.usage_rows} hourly and daily totals.",
                "Requests about it, under its name (pending ones are cancelled).",
                *(f"{d.name}: {line}" for d in what.deletions for line in d.history),
            ],
        },
    }


class OffboardView(APIView):
    """Offboard a team (platform admins), as the offboarding page does:
    ``?dry_run=true`` answers what would leave the clusters (its namespaces and what the
    portal applied in them, its LocalQueues and memberships) and what history stays (the
    audit log, usage history, requests under its name), with the ``version`` read (also the
    ``ETag``). Without it, ``confirm_slug`` must be the team's slug (a 400 naming the field
    otherwise) and the version that dry run answered is sent back (``version`` or
    ``If-Match``): without one the answer is 428, for a team changed since it was read 412.
    The audit rows of one offboarding share its request id (``story``)."""

    @extend_schema(
        request=OffboardInput,
        responses={200: dict},
        parameters=[DRY_RUN, IF_MATCH],
    )
    def post(self, request: Request, slug: str) -> Response:
        require_platform_admin(request.user)  # first: a lead learns nothing of others' slugs
        dry = DryRunQuery(data=request.query_params)
        dry.is_valid(raise_exception=True)
        data = OffboardInput(data=request.data)
        data.is_valid(raise_exception=True)
        team = get_object_or_404(Team, slug=slug)
        if dry.validated_data["dry_run"]:
            what = offboarding_of(team)
            response = Response({"dry_run": True, **offboarding_body(what)})
            response["ETag"] = what.version
            return response
        version = data.validated_data["version"] or request.headers.get("If-Match", "")
        what = offboarding_of(team)
        try:
            story = offboard_team(
                actor=request.user,
                team_id=team.pk,
                typed_slug=data.validated_data["confirm_slug"],
                version=version.strip(),
                source="api",
            )
        except DomainError as error:
            if error.code != "precondition_failed":
                raise
            if not version.strip():
                return Response(
                    {
                        "detail": "Offboarding needs the version a dry run answered "
                        "(version or If-Match).",
                        "code": "precondition_required",
                        **offboarding_body(what),
                    },
                    status=status.HTTP_428_PRECONDITION_REQUIRED,
                )
            return Response(
                {"detail": error.message, "code": error.code},
                status=status.HTTP_412_PRECONDITION_FAILED,
            )
        return Response({"dry_run": False, "story": story, **offboarding_body(what)})
