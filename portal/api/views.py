"""REST API plumbing (error format, tokens, audit, sync status, manifests)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import RequestDataTooBig
from django.core.exceptions import ValidationError as DjangoValidationError
from django.http import Http404
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.exceptions import APIException, NotFound
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from portal.access.permissions import user_id
from portal.access.selectors import audit_events_for_user, pod_names_for
from portal.access.tokens import create_token, revoke_token
from portal.api.filters import AuditEventFilter
from portal.api.parsers import BodyTooLarge
from portal.api.safety import StrictInput
from portal.audit.rows import redacted_values
from portal.audit.text import audit_changes, event_label
from portal.models import ApiToken, AuditEvent
from portal.vocabulary.errors import DomainError
from portal.vocabulary.names import CLUSTER_UNKNOWN, PodNames


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """One error format: ``{"detail", "code"}`` plus ``"errors": {field: [...]}`` for 400s."""
    if isinstance(exc, RequestDataTooBig):
        exc = BodyTooLarge(
            f"The request body is larger than {settings.DATA_UPLOAD_MAX_MEMORY_SIZE} bytes."
        )
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
    clusters = getattr(exc, "clusters", None)
    if isinstance(exc, NotFound) and isinstance(clusters, list):
        # a nested route's unknown cluster (cluster.api_scope.NoSuchCluster) names those there are
        return Response(
            {"detail": str(exc.detail), "code": "not_found", "clusters": clusters},
            status=status.HTTP_404_NOT_FOUND,
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
    lookup_value_regex = r"\d+"  # an id that is no number is a 404, not a 500

    def get_queryset(self) -> Any:
        if getattr(self, "swagger_fake_view", False):
            return ApiToken.objects.none()
        return ApiToken.objects.filter(user_id=user_id(self.request.user))

    @extend_schema(request=TokenCreateSerializer, responses={201: TokenCreatedSerializer})
    def create(self, request: Request) -> Response:
        """A new token, from a signed-in session only: a token never mints another (which
        could outlive it, and its revocation)."""
        if isinstance(request.auth, ApiToken):
            raise DjangoPermissionDenied(
                "API tokens are created by a signed-in person (the Tokens page, or this call "
                "with the session), not by another token."
            )
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
    """An event as recorded (``old``/``new``) and as people read it (``event_label``, and
    ``changes``: one entry per field, ``text`` as the Audit page shows it)."""

    team: serializers.SlugRelatedField[Any] = serializers.SlugRelatedField(
        slug_field="slug", read_only=True, allow_null=True
    )
    event_label = serializers.SerializerMethodField()
    changes = serializers.SerializerMethodField()

    class Meta:
        model = AuditEvent
        fields = [
            "id",
            "time",
            "actor_name",
            "team",
            "team_name",
            "event",
            "target_type",
            "target_id",
            "target_repr",
            "old",
            "new",
            "source",
            "request_id",
            "cause",
            "event_label",
            "changes",
        ]

    def get_event_label(self, event: AuditEvent) -> str:
        return event_label(event.event)

    def get_changes(self, event: AuditEvent) -> list[dict[str, str]]:
        names = self._names()
        return [
            {"field": c.field, "kind": c.kind, "old": c.old, "new": c.new, "text": c.text}
            for c in audit_changes(event.event, *redacted_values(event, names))
        ]

    def to_representation(self, instance: AuditEvent) -> dict[str, Any]:
        """Other teams' pods counted, never named (as on the Audit page)."""
        data: dict[str, Any] = super().to_representation(instance)
        names = self._names()
        # an audit event records no cluster: see ``redacted_values``
        data["old"] = names.redact_value(data["old"], CLUSTER_UNKNOWN)
        data["new"] = names.redact_value(data["new"], CLUSTER_UNKNOWN)
        return data

    def _names(self) -> PodNames:
        context: dict[str, Any] = self.context  # type: ignore[assignment]
        if "pod_names" not in context:  # once per response, shared by its rows
            request = context.get("request")
            context["pod_names"] = (
                pod_names_for(request.user) if request is not None else PodNames(True, frozenset())
            )
        return context["pod_names"]  # type: ignore[no-any-return]


class AuditEventViewSet(viewsets.ReadOnlyModelViewSet[AuditEvent]):
    """The audit log: everything for platform admins and approvers, your teams' otherwise."""

    serializer_class = AuditEventSerializer
    filterset_class = AuditEventFilter

    def get_queryset(self) -> Any:
        return audit_events_for_user(self.request.user)
