"""Your notifications, your notification subscriptions and whether you are told without
subscribing, over the REST API (the same services as the pages: the same scope, the same
field errors, the same audit)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from portal.api.safety import BoundedList, StrictInput
from portal.models import Notification, NotificationSubscription
from portal.notifications.payloads import KINDS
from portal.notifications.subscriptions import (
    create_subscription,
    delete_subscription,
    is_told_by_default,
    mark_read,
    mask,
    notifications_for_user,
    set_told_by_default,
    subscriptions_for_user,
    teams_user_may_subscribe_for,
)


class SubscriptionSerializer(serializers.ModelSerializer[NotificationSubscription]):
    team: serializers.SlugRelatedField[Any] = serializers.SlugRelatedField(
        slug_field="slug", read_only=True, allow_null=True
    )
    kinds = BoundedList(
        most=lambda: len(KINDS), noun="kind", child=serializers.ChoiceField(choices=list(KINDS))
    )
    target = serializers.SerializerMethodField(
        help_text="An e-mail address in full; a webhook URL as its host and last characters."
    )

    class Meta:
        model = NotificationSubscription
        fields = [
            "id",
            "team",
            "kinds",
            "channel",
            "target",
            "created_at",
            "last_sent_at",
            "last_error",
        ]

    def get_target(self, sub: NotificationSubscription) -> str:
        return mask(sub.target, sub.channel)


class SubscriptionCreateSerializer(StrictInput, serializers.Serializer[Any]):
    team = serializers.CharField(
        required=False, allow_null=True, help_text="A team's slug; null: every team (admins)."
    )
    kinds = BoundedList(
        most=lambda: len(KINDS), noun="kind", child=serializers.ChoiceField(choices=list(KINDS))
    )
    channel = serializers.ChoiceField(choices=NotificationSubscription.Channel.choices)
    target = serializers.CharField(
        required=False,
        allow_blank=True,
        max_length=2000,
        help_text="E-mail: an address (empty: your account's); Slack, Teams, webhook: the URL "
        "(https only in production); in the portal only: empty.",
    )


class SubscriptionViewSet(
    mixins.ListModelMixin,
    mixins.DestroyModelMixin,
    viewsets.GenericViewSet[NotificationSubscription],
):
    """Which events reach you, and how (see the Notification settings page)."""

    serializer_class = SubscriptionSerializer
    lookup_value_regex = r"\d+"

    def get_queryset(self) -> Any:
        if getattr(self, "swagger_fake_view", False):
            return NotificationSubscription.objects.none()
        return subscriptions_for_user(self.request.user)

    @extend_schema(request=SubscriptionCreateSerializer, responses={201: SubscriptionSerializer})
    def create(self, request: Request) -> Response:
        data = SubscriptionCreateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        slug = data.validated_data.get("team")
        team = None
        if slug:
            team = teams_user_may_subscribe_for(request.user).filter(slug=slug).first()
            if team is None:  # a team you cannot follow is one that does not exist
                raise serializers.ValidationError(
                    {"team": ["You lead no such team: a lead follows their own teams' events."]}
                )
        sub = create_subscription(
            user=request.user,
            team=team,
            kinds=data.validated_data["kinds"],
            channel=data.validated_data["channel"],
            target=data.validated_data.get("target", ""),
            source="api",
        )
        return Response(SubscriptionSerializer(sub).data, status=status.HTTP_201_CREATED)

    def destroy(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        delete_subscription(user=request.user, subscription_id=int(kwargs["pk"]), source="api")
        return Response(status=status.HTTP_204_NO_CONTENT)


class NotificationSerializer(serializers.ModelSerializer[Notification]):
    class Meta:
        model = Notification
        fields = ["id", "created_at", "event", "kind", "title", "text", "url", "team", "read_at"]


class NotificationViewSet(viewsets.ReadOnlyModelViewSet[Notification]):
    """Your notifications, the latest first; ``read`` marks one read."""

    serializer_class = NotificationSerializer
    lookup_value_regex = r"\d+"
    filter_backends: list[Any] = []

    def get_queryset(self) -> Any:
        if getattr(self, "swagger_fake_view", False):
            return Notification.objects.none()
        return notifications_for_user(self.request.user)

    @extend_schema(request=None, responses={200: NotificationSerializer})
    @action(detail=True, methods=["post"])
    def read(self, request: Request, pk: str) -> Response:
        note = self.get_object()
        mark_read(user=request.user, notification_id=note.pk)
        note.refresh_from_db()
        return Response(NotificationSerializer(note).data)


class NotificationPreferenceSerializer(StrictInput, serializers.Serializer[Any]):
    told_by_default = serializers.BooleanField(
        help_text="Whether you are told, in the portal and by e-mail to your account's "
        "address, of the events that concern you without subscribing: your own requests "
        "decided and ended, the changes that hit your teams. Off: only your subscriptions "
        "reach you."
    )


class NotificationPreferenceView(APIView):
    """Your own default notifications (see the Notification settings page, "Told without
    subscribing"): on unless you turned them off. PUT sets it; a change is audited."""

    @extend_schema(responses={200: NotificationPreferenceSerializer})
    def get(self, request: Request) -> Response:
        return Response({"told_by_default": is_told_by_default(request.user)})

    @extend_schema(
        request=NotificationPreferenceSerializer, responses={200: NotificationPreferenceSerializer}
    )
    def put(self, request: Request) -> Response:
        data = NotificationPreferenceSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        on = data.validated_data["told_by_default"]
        set_told_by_default(user=request.user, on=on, source="api")
        return Response({"told_by_default": on})
