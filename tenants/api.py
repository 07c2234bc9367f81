"""REST API of tenants: teams, namespaces with quotas and limits, memberships and the
PriorityClass catalog."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.core.exceptions import ValidationError
from django.db.models import Prefetch
from django.http import Http404
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from cluster.api_scope import (
    ClusterScoped,
    already_there,
    cluster_field,
    cluster_input,
    keep_cluster,
    unchanged_cluster,
)
from portal.access.permissions import is_approver, is_platform_admin, sees_every_team, user_id
from portal.api.safety import (
    IDEMPOTENCY_KEY,
    IF_MATCH,
    IF_MATCH_REQUIRED,
    BoundedList,
    StrictInput,
    etag_of,
    guarded_write,
    idempotent,
)
from portal.services import require_platform_admin
from tenants import services as tenant_services
from tenants.filters import MembershipFilter, NamespaceFilter
from tenants.models import Membership, Namespace, PriorityClass, Team
from tenants.rules import LIMIT_TYPES, LimitSpec
from tenants.selectors import (
    list_teams_for_user,
    namespace_deletion,
    namespace_etag,
    with_items,
)


class TeamSerializer(serializers.ModelSerializer[Team]):
    namespaces: serializers.SlugRelatedField[Any] = serializers.SlugRelatedField(
        many=True, read_only=True, slug_field="name"
    )
    allowed_priority_classes: serializers.SlugRelatedField[Any] = serializers.SlugRelatedField(
        many=True, read_only=True, slug_field="name"
    )

    class Meta:
        model = Team
        fields = ["slug", "name", "description", "namespaces", "allowed_priority_classes"]


def team_etag(team: Team) -> str:
    return etag_of(
        team.pk,
        team.name,
        team.description,
        sorted(pc.name for pc in team.allowed_priority_classes.all()),
    )


def priority_class_count() -> int:
    """No team is allowed more priority classes than the catalogue holds."""
    return PriorityClass.objects.count()


class TeamWriteSerializer(StrictInput, serializers.Serializer[Any]):
    slug = serializers.CharField(max_length=63)
    name = serializers.CharField(max_length=100)
    description = serializers.CharField(required=False, allow_blank=True, default="")
    allowed_priority_classes = BoundedList(
        most=priority_class_count,
        noun="priority class",
        child=serializers.CharField(max_length=253),
        required=False,
        default=list,
    )


class TeamPatchSerializer(TeamWriteSerializer):
    slug = None  # type: ignore[assignment]
    name = serializers.CharField(max_length=100, required=False)
    description = serializers.CharField(required=False, allow_blank=True)
    allowed_priority_classes = BoundedList(
        most=priority_class_count,
        noun="priority class",
        child=serializers.CharField(max_length=253),
        required=False,
    )


def _priority_classes(names: list[str]) -> list[PriorityClass]:
    found = {pc.name: pc for pc in PriorityClass.objects.filter(name__in=names)}
    missing = [name for name in names if name not in found]
    if missing:
        raise ValidationError(
            {"allowed_priority_classes": [f"No such PriorityClass: {', '.join(missing)}."]}
        )
    return [found[name] for name in names]


class TeamViewSet(
    mixins.CreateModelMixin, mixins.UpdateModelMixin, viewsets.ReadOnlyModelViewSet[Team]
):
    """Your teams (every team for platform admins). Platform admins create and change teams;
    a change needs no ``If-Match``, but one that does not match the current ``ETag`` is
    refused with 412."""

    serializer_class = TeamSerializer
    lookup_field = "slug"
    http_method_names = ["get", "post", "patch", "head", "options"]

    def retrieve(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        team = self.get_object()
        response = Response(self.get_serializer(team).data)
        response["ETag"] = team_etag(team)
        return response

    @extend_schema(
        request=TeamWriteSerializer, responses={201: TeamSerializer}, parameters=[IDEMPOTENCY_KEY]
    )
    @idempotent
    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        require_platform_admin(request.user)  # first: a lead learns nothing of others' slugs
        data = TeamWriteSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        values = data.validated_data
        classes = _priority_classes(values["allowed_priority_classes"])
        if Team.objects.filter(slug=values["slug"]).exists():
            raise ValidationError({"slug": ["A team with this slug exists."]})
        team = tenant_services.save_team(
            actor=request.user,
            team=Team(slug=values["slug"], name=values["name"], description=values["description"]),
            source="api",
            allowed_priority_classes=classes,
        )
        response = Response(TeamSerializer(team).data, status=status.HTTP_201_CREATED)
        response["ETag"] = team_etag(team)
        return response

    @extend_schema(
        request=TeamPatchSerializer, responses={200: TeamSerializer}, parameters=[IF_MATCH]
    )
    def partial_update(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        data = TeamPatchSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        values = data.validated_data
        classes = (
            _priority_classes(values["allowed_priority_classes"])
            if "allowed_priority_classes" in values
            else None
        )
        with guarded_write(request, Team.objects.all(), self.get_object().pk, team_etag) as (
            team,
            refused,
        ):
            if refused is not None:
                return refused
            for field in ("name", "description"):
                if field in values:
                    setattr(team, field, values[field])
            tenant_services.save_team(
                actor=request.user, team=team, source="api", allowed_priority_classes=classes
            )
        team = self.get_queryset().get(pk=team.pk)
        response = Response(TeamSerializer(team).data)
        response["ETag"] = team_etag(team)
        return response

    def update(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return self.partial_update(request, *args, **kwargs)

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
    team: serializers.SlugRelatedField[Any] = serializers.SlugRelatedField(
        slug_field="slug", read_only=True
    )
    cluster = cluster_field()
    quota = serializers.SerializerMethodField()
    limits = serializers.SerializerMethodField()

    class Meta:
        model = Namespace
        fields = ["name", "cluster", "team", "description", "quota", "limits"]

    # Items read with the namespace (``tenants.selectors.with_items``), else its prefetched
    # or related items.
    def get_quota(self, ns: Namespace) -> dict[str, str]:
        rows = getattr(ns, "quota_rows", None)
        if rows is not None:
            return {row["resource"]: row["hard"] for row in rows}
        return {i.resource: i.hard for i in ns.quota_items.all()}

    def get_limits(self, ns: Namespace) -> list[dict[str, str]]:
        rows = getattr(ns, "limit_rows", None)
        if rows is not None:
            return [LimitSpec(**row).__dict__ for row in rows]
        return [i.spec().__dict__ for i in ns.limit_items.all()]


class NamespaceCreateSerializer(StrictInput, serializers.Serializer[Any]):
    name = serializers.CharField(max_length=63)
    cluster = cluster_input("namespace")
    team = serializers.SlugField()
    description = serializers.CharField(required=False, allow_blank=True, default="")


class NamespacePatchSerializer(StrictInput, serializers.Serializer[Any]):
    description = serializers.CharField(required=False, allow_blank=True)
    cluster = unchanged_cluster("namespace")


class QuotaWriteSerializer(StrictInput, serializers.Serializer[Any]):
    cluster = unchanged_cluster("namespace")
    hard = serializers.DictField(child=serializers.CharField(max_length=64), allow_empty=True)
    override_reason = serializers.CharField(
        required=False,
        allow_blank=True,
        default="",
        help_text="Why a GPU quota is raised above what the fleet could ever offer (refused "
        "without it); recorded in the audit.",
    )


class LimitItemSerializer(StrictInput, serializers.Serializer[Any]):
    limit_type = serializers.ChoiceField(choices=list(LIMIT_TYPES))
    resource = serializers.CharField(max_length=253)
    default = serializers.CharField(max_length=64, required=False, allow_blank=True, default="")
    default_request = serializers.CharField(
        max_length=64, required=False, allow_blank=True, default=""
    )
    max = serializers.CharField(max_length=64, required=False, allow_blank=True, default="")
    min = serializers.CharField(max_length=64, required=False, allow_blank=True, default="")


class LimitsWriteSerializer(StrictInput, serializers.Serializer[Any]):
    cluster = unchanged_cluster("namespace")
    limits = LimitItemSerializer(many=True, allow_empty=True)


class NamespaceViewSet(
    ClusterScoped,
    mixins.CreateModelMixin,
    mixins.DestroyModelMixin,
    viewsets.ReadOnlyModelViewSet[Namespace],
):
    """Namespaces of your teams with their quota and limits, each on its cluster. Platform
    admins create and remove namespaces, change a description (``PATCH``) and replace a
    quota or limits (``PUT …/quota/``, ``PUT …/limits/``); ``If-Match`` with the
    namespace's ``ETag`` makes a write fail with 412 when someone changed it since it was
    read."""

    serializer_class = NamespaceSerializer
    lookup_field = "name"
    filterset_class = NamespaceFilter
    kind = "namespace"

    def retrieve(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        ns = self.get_object()
        response = Response(self.get_serializer(ns).data)
        response["ETag"] = namespace_etag(ns)
        return response

    def _replace(
        self,
        request: Request,
        serializer: type[serializers.Serializer[Any]],
        write: Callable[[Namespace, dict[str, Any]], list[str]],
    ) -> Response:
        """Replace part of the namespace: If-Match, validate, write, answer with the fresh
        namespace, its ETag and the write's warnings."""
        data = serializer(data=request.data)
        data.is_valid(raise_exception=True)
        with guarded_write(
            request, Namespace.objects.all(), self.get_object().pk, namespace_etag
        ) as (ns, refused):
            if refused is not None:
                return refused
            keep_cluster(ns, "namespace", data.validated_data, ns.cluster.name)
            warnings = write(ns, data.validated_data)
        response = self._fresh(ns)
        response.data = {**response.data, "warnings": warnings}
        return response

    def _fresh(self, ns: Namespace) -> Response:
        ns = self.get_queryset().get(pk=ns.pk)
        response = Response(NamespaceSerializer(ns).data)
        response["ETag"] = namespace_etag(ns)
        return response

    @extend_schema(
        request=NamespaceCreateSerializer,
        responses={201: NamespaceSerializer},
        parameters=[IDEMPOTENCY_KEY],
    )
    @idempotent
    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        require_platform_admin(request.user)  # first: a lead learns nothing of others' teams
        data = NamespaceCreateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        values = data.validated_data
        team = Team.objects.filter(slug=values["team"]).first()
        if team is None:
            raise ValidationError({"team": ["No such team."]})
        cluster = self.chosen_cluster(values.get("cluster"))
        if Namespace.objects.filter(cluster=cluster, name=values["name"]).exists():
            raise ValidationError({"name": [already_there(cluster, "namespace", values["name"])]})
        ns = tenant_services.save_namespace(
            actor=request.user,
            namespace=Namespace(
                name=values["name"],
                team=team,
                description=values["description"],
                cluster=cluster,
            ),
            source="api",
        )
        response = self._fresh(ns)
        response.status_code = status.HTTP_201_CREATED
        return response

    @extend_schema(
        request=NamespacePatchSerializer,
        responses={200: NamespaceSerializer},
        parameters=[IF_MATCH],
    )
    def partial_update(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """Change the namespace's description (platform admins); its cluster stays."""
        target = self.get_object()  # another team's namespace: 404
        require_platform_admin(request.user)
        data = NamespacePatchSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        with guarded_write(request, Namespace.objects.all(), target.pk, namespace_etag) as (
            ns,
            refused,
        ):
            if refused is not None:
                return refused
            keep_cluster(ns, "namespace", data.validated_data, target.cluster.name)
            if "description" in data.validated_data:
                ns.description = data.validated_data["description"]
                tenant_services.save_namespace(actor=request.user, namespace=ns, source="api")
        return self._fresh(ns)

    @extend_schema(parameters=[IF_MATCH_REQUIRED])
    def destroy(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """Delete a namespace: ``If-Match`` with the ETag of a read is required. The applier
        then removes the portal's objects in it from the cluster (its ResourceQuota,
        LimitRange, LocalQueues) and the namespace itself when the portal created it."""
        target = self.get_object()  # another team's namespace: 404
        require_platform_admin(request.user)  # a lead: 403, before any precondition
        if not request.headers.get("If-Match", "").strip():
            said = namespace_deletion(target)
            return Response(
                {
                    "detail": f"{said.summary} It needs If-Match with the ETag of a read.",
                    "code": "precondition_required",
                    "removes": said.cluster,
                    "keeps": said.history,
                },
                status=status.HTTP_428_PRECONDITION_REQUIRED,
            )
        with guarded_write(request, Namespace.objects.all(), target.pk, namespace_etag) as (
            ns,
            refused,
        ):
            if refused is not None:
                return refused
            tenant_services.delete_namespace(actor=request.user, namespace=ns, source="api")
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(
        request=QuotaWriteSerializer, responses={200: NamespaceSerializer}, parameters=[IF_MATCH]
    )
    @action(detail=True, methods=["put"])
    def quota(self, request: Request, name: str) -> Response:
        """Replace the namespace's ResourceQuota ``hard`` items (an empty map removes them)."""
        return self._replace(
            request,
            QuotaWriteSerializer,
            lambda ns, values: tenant_services.set_namespace_quota(
                actor=request.user,
                namespace=ns,
                hard=values["hard"],
                source="api",
                override_reason=values["override_reason"],
            ),
        )

    @extend_schema(
        request=LimitsWriteSerializer, responses={200: NamespaceSerializer}, parameters=[IF_MATCH]
    )
    @action(detail=True, methods=["put"])
    def limits(self, request: Request, name: str) -> Response:
        """Replace the namespace's LimitRange items (an empty list removes them)."""
        return self._replace(
            request,
            LimitsWriteSerializer,
            lambda ns, values: tenant_services.set_namespace_limits(
                actor=request.user,
                namespace=ns,
                limits=[LimitSpec(**item) for item in values["limits"]],
                source="api",
            ),
        )

    def get_queryset(self) -> Any:
        teams = list_teams_for_user(self.request.user)
        return with_items(
            Namespace.objects.filter(team__in=teams).select_related("team", "cluster")
        )


class MembershipSerializer(serializers.ModelSerializer[Any]):
    team: serializers.SlugRelatedField[Any] = serializers.SlugRelatedField(
        slug_field="slug", read_only=True
    )
    user = serializers.CharField(source="user.get_username", read_only=True)

    class Meta:
        from tenants.models import Membership

        model = Membership
        fields = ["id", "team", "user", "role"]


class MembershipViewSet(viewsets.ReadOnlyModelViewSet[Any]):
    """Members of your teams."""

    serializer_class = MembershipSerializer
    filterset_class = MembershipFilter

    def get_queryset(self) -> Any:
        teams = list_teams_for_user(self.request.user)
        return Membership.objects.filter(team__in=teams).select_related("team", "user")


class TeamMemberSerializer(serializers.ModelSerializer[Any]):
    user = serializers.CharField(source="user.get_username", read_only=True)

    class Meta:
        model = Membership
        fields = ["id", "user", "role", "granted_by"]


class TeamMemberInput(StrictInput, serializers.Serializer[Any]):
    username = serializers.CharField(max_length=150)
    role = serializers.ChoiceField(
        choices=Membership.Role.choices,
        help_text="A team role: lead, member or viewer (platform roles are granted elsewhere).",
    )


class TeamRoleInput(StrictInput, serializers.Serializer[Any]):
    role = serializers.ChoiceField(choices=Membership.Role.choices)


def team_of_members_page(request: Request, slug: str, *, manage: bool) -> Team:
    """The team whose members ``request`` reads (its members, and those who see every team;
    any other team is answered as one there is not) and, to ``manage``, changes (its leads
    and platform admins: a 403 for its other members): the members page's rule."""
    team = Team.objects.filter(slug=slug).first()
    if team is None or (
        not sees_every_team(request.user)
        and not team.memberships.filter(user_id=user_id(request.user)).exists()
    ):
        raise Http404("No such team.")
    if manage:
        tenant_services.require_team_lead(request.user, team)
    return team


class TeamMembersView(APIView):
    """A team's members (``/api/v1/teams/<slug>/members/``): its members and those who see
    every team read them; its leads and platform admins add a person or change their team
    role (POST: lead, member or viewer; platform roles are granted elsewhere). The last lead
    stays a lead; memberships single sign-on grants follow the IdP. Another team is a 404,
    as every team-scoped route answers."""

    @extend_schema(responses={200: TeamMemberSerializer(many=True)})
    def get(self, request: Request, slug: str) -> Response:
        team = team_of_members_page(request, slug, manage=False)
        rows = team.memberships.select_related("user").order_by("role", "user__username")
        return Response(TeamMemberSerializer(rows, many=True).data)

    @extend_schema(
        request=TeamMemberInput,
        responses={200: TeamMemberSerializer, 201: TeamMemberSerializer},
        parameters=[IDEMPOTENCY_KEY],
    )
    @idempotent
    def post(self, request: Request, slug: str) -> Response:
        team = team_of_members_page(request, slug, manage=True)
        data = TeamMemberInput(data=request.data)
        data.is_valid(raise_exception=True)
        existed = team.memberships.filter(
            user__username=data.validated_data["username"].strip()
        ).exists()
        membership = tenant_services.set_team_member(
            actor=request.user,
            team=team,
            username=data.validated_data["username"],
            role=data.validated_data["role"],
            source="api",
        )
        return Response(
            TeamMemberSerializer(membership).data,
            status=status.HTTP_200_OK if existed else status.HTTP_201_CREATED,
        )


class TeamMemberView(APIView):
    """One member of a team: change their team role (PATCH) or take them out of the team
    (DELETE), by the team's leads and platform admins, as on the members page."""

    def _membership(self, request: Request, slug: str, username: str) -> Membership:
        team = team_of_members_page(request, slug, manage=True)
        membership = (
            team.memberships.select_related("user", "team").filter(user__username=username).first()
        )
        if membership is None:
            raise Http404("No such member.")
        return membership

    @extend_schema(request=TeamRoleInput, responses={200: TeamMemberSerializer})
    def patch(self, request: Request, slug: str, username: str) -> Response:
        membership = self._membership(request, slug, username)
        data = TeamRoleInput(data=request.data)
        data.is_valid(raise_exception=True)
        changed = tenant_services.set_team_member(
            actor=request.user,
            team=membership.team,
            username=membership.user.get_username(),
            role=data.validated_data["role"],
            source="api",
        )
        return Response(TeamMemberSerializer(changed).data)

    @extend_schema(responses={204: None})
    def delete(self, request: Request, slug: str, username: str) -> Response:
        membership = self._membership(request, slug, username)
        tenant_services.remove_team_member(
            actor=request.user, membership_id=membership.pk, team=membership.team, source="api"
        )
        return Response(status=status.HTTP_204_NO_CONTENT)


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
        return PriorityClass.objects.all()


class MyTeamSerializer(serializers.Serializer[Any]):
    slug = serializers.SlugField(source="team.slug")
    name = serializers.CharField(source="team.name")
    role = serializers.ChoiceField(choices=Membership.Role.choices, help_text="Your role in it.")


class MeSerializer(serializers.Serializer[Any]):
    username = serializers.CharField()
    platform_admin = serializers.BooleanField(help_text="A platform admin: every team, every door.")
    approver = serializers.BooleanField(
        help_text="Decides MIG changes, drains and quota requests (never their own)."
    )
    sees_every_team = serializers.BooleanField(
        help_text="Reads every team's objects (platform admins and approvers)."
    )
    teams = MyTeamSerializer(many=True, help_text="Your teams, each with your role.")


class MeView(APIView):
    """Who the token (or the session) is: the username, whether a platform admin or an
    approver, and their teams with their role in each (``/api/v1/me/``). Tools use it to
    leave out what this user cannot do, such as deciding their own requests."""

    @extend_schema(responses={200: MeSerializer})
    def get(self, request: Request) -> Response:
        user = request.user
        memberships = (
            Membership.objects.filter(user_id=user_id(user))
            .select_related("team")
            .order_by("team__slug")
        )
        return Response(
            MeSerializer(
                {
                    "username": user.get_username(),
                    "platform_admin": is_platform_admin(user),
                    "approver": is_approver(user),
                    "sees_every_team": sees_every_team(user),
                    "teams": list(memberships),
                }
            ).data
        )
