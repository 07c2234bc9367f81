"""REST API plumbing (error format, tokens, audit, sync status, manifests)."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import ValidationError as DjangoValidationError
from django.http import Http404, HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.exceptions import APIException
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView
from rest_framework.views import exception_handler as drf_exception_handler

from portal.api_safety import StrictInput
from portal.errors import DomainError
from portal.models import ApiToken, AuditEvent
from portal.permissions import is_platform_admin
from portal.selectors import audit_events_for_user
from portal.tokens import create_token, revoke_token


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """One error format: ``{"detail", "code"}`` plus ``"errors": {field: [...]}`` for 400s."""
    if isinstance(exc, DjangoValidationError):
        errors = (
            exc.message_dict if hasattr(exc, "error_dict") else {"non_field_errors": exc.messages}
        )
        return Response(
            {"detail": "Invalid input.", "code": "invalid", "errors": errors},
            status=status.HTTP_400_BAD_REQUEST,
        )
    if isinstance(exc, DomainError):
        return Response({"detail": exc.message, "code": exc.code}, status=status.HTTP_409_CONFLICT)
    if isinstance(exc, DjangoPermissionDenied):
        return Response(
            {"detail": str(exc) or "Not allowed.", "code": "permission_denied"},
            status=status.HTTP_403_FORBIDDEN,
        )
    if isinstance(exc, Http404):
        return Response(
            {"detail": "Not found.", "code": "not_found"}, status=status.HTTP_404_NOT_FOUND
        )
    response = drf_exception_handler(exc, context)
    if response is not None and isinstance(exc, APIException):
        detail = response.data
        if isinstance(detail, dict) and "detail" not in detail:
            response.data = {"detail": "Invalid input.", "code": "invalid", "errors": detail}
        elif isinstance(detail, dict):
            response.data = {
                "detail": str(detail["detail"]),
                "code": getattr(exc, "default_code", "error"),
            }
        elif isinstance(detail, list):
            response.data = {
                "detail": "Invalid input.",
                "code": "invalid",
                "errors": {"non_field_errors": detail},
            }
    return response


class TokenSerializer(serializers.ModelSerializer[ApiToken]):
    class Meta:
        model = ApiToken
        fields = ["id", "name", "prefix", "created_at", "expires_at", "revoked_at", "last_used_at"]


class TokenCreateSerializer(StrictInput, serializers.Serializer[Any]):
    name = serializers.CharField(max_length=100)
    days = serializers.IntegerField(required=False, allow_null=True, default=90)


class TokenCreatedSerializer(TokenSerializer):
    token = serializers.CharField(help_text="Shown once: store it now.")

    class Meta(TokenSerializer.Meta):
        fields = [*TokenSerializer.Meta.fields, "token"]


class TokenViewSet(
    mixins.ListModelMixin, mixins.DestroyModelMixin, viewsets.GenericViewSet[ApiToken]
):
    """Your personal API tokens. Creating one shows its text once; deleting revokes it."""

    serializer_class = TokenSerializer

    def get_queryset(self) -> Any:
        if getattr(self, "swagger_fake_view", False):
            return ApiToken.objects.none()
        return ApiToken.objects.filter(user=self.request.user)

    @extend_schema(request=TokenCreateSerializer, responses={201: TokenCreatedSerializer})
    def create(self, request: Request) -> Response:
        data = TokenCreateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        token, text = create_token(
            user=request.user,
            name=data.validated_data["name"],
            days=data.validated_data.get("days"),
            source="api",
        )
        body = TokenSerializer(token).data | {"token": text}
        return Response(body, status=status.HTTP_201_CREATED)

    def destroy(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        revoke_token(user=request.user, token_id=int(kwargs["pk"]), source="api")
        return Response(status=status.HTTP_204_NO_CONTENT)


class AuditEventSerializer(serializers.ModelSerializer[AuditEvent]):
    team = serializers.SlugRelatedField(slug_field="slug", read_only=True, allow_null=True)

    class Meta:
        model = AuditEvent
        fields = [
            "id",
            "time",
            "actor_name",
            "team",
            "event",
            "target_type",
            "target_id",
            "target_repr",
            "old",
            "new",
            "source",
        ]


class AuditEventViewSet(viewsets.ReadOnlyModelViewSet[AuditEvent]):
    """The audit log: everything for platform admins and approvers, your teams' otherwise."""

    serializer_class = AuditEventSerializer
    filterset_fields = ["event", "source"]

    def get_queryset(self) -> Any:
        return audit_events_for_user(self.request.user)


class SyncStatusView(APIView):
    """The last poll of the cluster and the objects not applied."""

    @extend_schema(responses={200: dict})
    def get(self, request: Request) -> Response:
        from fleet.selectors import apply_problems, last_sync

        run = last_sync()
        return Response(
            {
                "last_sync": None
                if run is None
                else {
                    "started_at": run.started_at,
                    "duration_ms": run.duration_ms,
                    "nodes": run.nodes,
                    "pods": run.pods,
                    "ok": run.ok,
                    "error": run.error,
                },
                "not_applied": [
                    {
                        "kind": p.kind,
                        "namespace": p.namespace,
                        "name": p.name,
                        "outcome": p.outcome,
                        "message": p.message,
                    }
                    for p in apply_problems()
                ],
            }
        )


class ManifestsView(APIView):
    """Everything the portal manages, rendered (``?format=yaml`` for a YAML stream)."""

    @extend_schema(
        parameters=[
            OpenApiParameter("team", str),
            OpenApiParameter("format", str, enum=["json", "yaml"]),
        ],
        # The YAML form is a stream of documents (``---``), served as text for
        # ``kubectl apply -f -``.
        responses={(200, "application/json"): dict, (200, "text/plain"): OpenApiTypes.STR},
    )
    def get(self, request: Request) -> Response | HttpResponse:
        from rest_framework import serializers as drf

        from portal.manifests import collect_manifests, to_yaml_stream
        from tenants.selectors import list_teams_for_user

        team = request.query_params.get("team")
        if team is not None:
            team = drf.SlugField(max_length=63).run_validation(team)
        if team is None and not is_platform_admin(request.user):
            raise DjangoPermissionDenied(
                "Only platform admins export every object; pass ?team=<slug>."
            )
        if team is not None and not list_teams_for_user(request.user).filter(slug=team).exists():
            raise Http404
        manifests = collect_manifests(team_slug=team)
        if request.query_params.get("format") == "yaml":
            return HttpResponse(to_yaml_stream(manifests), content_type="text/plain; charset=utf-8")
        return Response({"items": manifests})
