"""REST API of tenants: teams, namespaces with quotas and limits, quota requests."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import PermissionDenied, ValidationError
from django.db.models import Prefetch
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from portal.api_safety import StrictInput, idempotent
from queues.models import ClusterQueue
from tenants import quota_requests as service
from tenants.models import Namespace, PriorityClass, QuotaChangeRequest, Team
from tenants.selectors import list_teams_for_user


class TeamSerializer(serializers.ModelSerializer[Team]):
    namespaces = serializers.SlugRelatedField(many=True, read_only=True, slug_field="name")
    allowed_priority_classes = serializers.SlugRelatedField(
        many=True, read_only=True, slug_field="name"
    )

    class Meta:
        model = Team
        fields = ["slug", "name", "description", "namespaces", "allowed_priority_classes"]


class TeamViewSet(viewsets.ReadOnlyModelViewSet[Team]):
    """Your teams (every team for platform admins)."""

    serializer_class = TeamSerializer
    lookup_field = "slug"

    def get_queryset(self) -> Any:
        # Only what the serializer shows (the pages' selector also loads quotas and queues).
        return (
            list_teams_for_user(self.request.user)
            .prefetch_related(None)
            .prefetch_related(
                Prefetch("namespaces", queryset=Namespace.objects.only("name", "team_id")),
                Prefetch("allowed_priority_classes", queryset=PriorityClass.objects.only("name")),
            )
        )


class NamespaceSerializer(serializers.ModelSerializer[Namespace]):
    team = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    quota = serializers.SerializerMethodField()
    limits = serializers.SerializerMethodField()

    class Meta:
        model = Namespace
        fields = ["name", "team", "description", "quota", "limits"]

    def get_quota(self, ns: Namespace) -> dict[str, str]:
        return {i.resource: i.hard for i in ns.quota_items.all()}

    def get_limits(self, ns: Namespace) -> list[dict[str, str]]:
        return [i.spec().__dict__ for i in ns.limit_items.all()]


class NamespaceViewSet(viewsets.ReadOnlyModelViewSet[Namespace]):
    serializer_class = NamespaceSerializer
    lookup_field = "name"

    def get_queryset(self) -> Any:
        teams = list_teams_for_user(self.request.user)
        return (
            Namespace.objects.filter(team__in=teams)
            .select_related("team")
            .prefetch_related("quota_items", "limit_items")
        )


class QuotaRequestSerializer(serializers.ModelSerializer[QuotaChangeRequest]):
    team = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    namespace = serializers.SlugRelatedField(slug_field="name", read_only=True)
    cluster_queue = serializers.SlugRelatedField(slug_field="name", read_only=True)
    auto_rule = serializers.SlugRelatedField(slug_field="name", read_only=True)

    class Meta:
        model = QuotaChangeRequest
        fields = [
            "id",
            "team",
            "kind",
            "namespace",
            "cluster_queue",
            "flavor",
            "resource",
            "previous",
            "requested",
            "reason",
            "grant_until",
            "state",
            "assessment",
            "auto_rule",
            "decision_comment",
            "decided_at",
            "created_at",
        ]


class QuotaRequestCreateSerializer(StrictInput, serializers.Serializer[Any]):
    team = serializers.SlugField()
    kind = serializers.ChoiceField(choices=QuotaChangeRequest.Kind.choices)
    namespace = serializers.CharField(required=False, allow_blank=True, default="")
    cluster_queue = serializers.CharField(required=False, allow_blank=True, default="")
    flavor = serializers.CharField(required=False, allow_blank=True, default="")
    resource = serializers.CharField(max_length=253)
    requested = serializers.CharField(max_length=64)
    reason = serializers.CharField(allow_blank=True)
    grant_until = serializers.DateTimeField(required=False, allow_null=True)


class QuotaDecisionSerializer(StrictInput, serializers.Serializer[Any]):
    comment = serializers.CharField(allow_blank=True, required=False, default="")


class QuotaRequestViewSet(
    mixins.CreateModelMixin, viewsets.ReadOnlyModelViewSet[QuotaChangeRequest]
):
    serializer_class = QuotaRequestSerializer
    filterset_fields = ["state", "kind"]

    def get_queryset(self) -> Any:
        return service.list_quota_requests_for_user(self.request.user)

    @extend_schema(request=QuotaRequestCreateSerializer, responses={201: QuotaRequestSerializer})
    @idempotent
    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        data = QuotaRequestCreateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        values = data.validated_data
        team = Team.objects.filter(slug=values["team"]).first()
        if team is None:
            raise ValidationError({"team": ["No such team."]})
        if not list_teams_for_user(request.user).filter(pk=team.pk).exists():
            raise PermissionDenied("Only the team's lead or a platform admin can ask for quota.")
        created = service.request_quota_change(
            actor=request.user,
            team=team,
            kind=values["kind"],
            resource=values["resource"],
            requested=values["requested"],
            reason=values["reason"],
            namespace=Namespace.objects.filter(name=values["namespace"]).first()
            if values["namespace"]
            else None,
            cluster_queue=ClusterQueue.objects.filter(name=values["cluster_queue"]).first()
            if values["cluster_queue"]
            else None,
            flavor=values["flavor"],
            grant_until=values.get("grant_until"),
            source="api",
        )
        created.refresh_from_db()
        return Response(QuotaRequestSerializer(created).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=QuotaDecisionSerializer, responses={200: QuotaRequestSerializer})
    @action(detail=True, methods=["post"])
    def approve(self, request: Request, pk: str) -> Response:
        data = QuotaDecisionSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        service.approve_quota_change(
            request_id=int(pk),
            approver=request.user,
            comment=data.validated_data["comment"],
            source="api",
        )
        return Response(
            QuotaRequestSerializer(service.get_quota_request_for_user(request.user, int(pk))).data
        )

    @extend_schema(request=QuotaDecisionSerializer, responses={200: QuotaRequestSerializer})
    @action(detail=True, methods=["post"])
    def reject(self, request: Request, pk: str) -> Response:
        data = QuotaDecisionSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        service.reject_quota_change(
            request_id=int(pk),
            approver=request.user,
            comment=data.validated_data["comment"],
            source="api",
        )
        return Response(
            QuotaRequestSerializer(service.get_quota_request_for_user(request.user, int(pk))).data
        )


class MembershipSerializer(serializers.ModelSerializer[Any]):
    team = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    user = serializers.CharField(source="user.get_username", read_only=True)

    class Meta:
        from tenants.models import Membership

        model = Membership
        fields = ["id", "team", "user", "role"]


class MembershipViewSet(viewsets.ReadOnlyModelViewSet[Any]):
    """Members of your teams."""

    serializer_class = MembershipSerializer
    filterset_fields = ["role"]

    def get_queryset(self) -> Any:
        from tenants.models import Membership

        teams = list_teams_for_user(self.request.user)
        return Membership.objects.filter(team__in=teams).select_related("team", "user")


class PriorityClassSerializer(serializers.ModelSerializer[Any]):
    class Meta:
        from tenants.models import PriorityClass

        model = PriorityClass
        fields = ["name", "value", "preemption_policy", "global_default", "description"]


class PriorityClassViewSet(viewsets.ReadOnlyModelViewSet[Any]):
    """The platform's PriorityClass catalog."""

    serializer_class = PriorityClassSerializer
    lookup_field = "name"

    def get_queryset(self) -> Any:
        from tenants.models import PriorityClass

        return PriorityClass.objects.all()
