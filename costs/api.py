"""Costs over the REST API: prices (everyone signed in reads them; platform admins add and
delete them through the service), the cost policy, a month's showback and a team's
invoice (JSON or CSV), with the pages' rows and the pages' scope."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from django.http import Http404, HttpResponse
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from costs import reports, selectors, services
from costs.models import CostPolicy, Price
from portal.access.permissions import sees_every_team
from portal.api.safety import StrictInput, StrictQuery
from portal.services import require_platform_admin

PER_HOUR = r"^\d{1,8}(\.\d{1,4})?$"
MONTH = r"^(19[7-9]\d|2\d{3})-(0[1-9]|1[0-2])$"  # 1970-01 to 2999-12


class PriceSerializer(serializers.ModelSerializer[Price]):
    per_hour = serializers.DecimalField(max_digits=12, decimal_places=4, coerce_to_string=True)

    class Meta:
        model = Price
        fields = [
            "id",
            "gpu_model",
            "profile",
            "device_class",
            "per_hour",
            "effective_from",
            "note",
        ]
        read_only_fields = ["id"]


class PriceWriteSerializer(StrictInput, serializers.Serializer[Any]):
    gpu_model = serializers.CharField(max_length=64)
    profile = serializers.CharField(max_length=32, required=False, default="", allow_blank=True)
    device_class = serializers.CharField(
        max_length=253,
        required=False,
        default="",
        allow_blank=True,
        help_text="A DRA DeviceClass (e.g. mig.nvidia.com): one hour of one device of the model "
        "allocated through it. Blank: the device plugin's GPU or MIG profile.",
    )
    per_hour = serializers.RegexField(
        PER_HOUR, max_length=13, help_text="The price of an hour, e.g. 4.50 (at most 4 decimals)."
    )
    effective_from = serializers.DateField()
    note = serializers.CharField(max_length=200, required=False, default="", allow_blank=True)


class PriceViewSet(
    mixins.CreateModelMixin, mixins.DestroyModelMixin, viewsets.ReadOnlyModelViewSet[Price]
):
    """Prices per GPU-hour of a GPU model, or of one MIG profile of it, or of one of its
    devices allocated through a DRA device class, from a day on."""

    serializer_class = PriceSerializer
    queryset = Price.objects.all()

    @extend_schema(request=PriceWriteSerializer, responses={201: PriceSerializer})
    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        require_platform_admin(request.user)
        data = PriceWriteSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        values = {**data.validated_data, "per_hour": Decimal(data.validated_data["per_hour"])}
        price = services.save_price(actor=request.user, price=Price(**values), source="api")
        return Response(PriceSerializer(price).data, status=status.HTTP_201_CREATED)

    def destroy(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        price = self.get_object()
        # the call is the confirmation (the page asks first)
        services.delete_price(actor=request.user, price=price, source="api", confirmed=True)
        return Response(status=status.HTTP_204_NO_CONTENT)


class PolicySerializer(StrictInput, serializers.Serializer[Any]):
    currency = serializers.RegexField(r"^[A-Za-z]{3}$", help_text="ISO 4217 code, e.g. EUR.")
    idle_sharing = serializers.ChoiceField(choices=CostPolicy.IdleSharing.choices)


class PolicyView(APIView):
    """The currency and who pays for idle capacity; platform admins set them with PUT."""

    @extend_schema(responses={200: PolicySerializer})
    def get(self, request: Request) -> Response:
        rules = selectors.policy()
        return Response({"currency": rules.currency, "idle_sharing": rules.idle_sharing})

    @extend_schema(request=PolicySerializer, responses={200: PolicySerializer})
    def put(self, request: Request) -> Response:
        require_platform_admin(request.user)
        data = PolicySerializer(data=request.data)
        data.is_valid(raise_exception=True)
        rules = services.set_cost_policy(actor=request.user, source="api", **data.validated_data)
        return Response({"currency": rules.currency, "idle_sharing": rules.idle_sharing})


class MonthQuery(StrictQuery):
    month = serializers.RegexField(MONTH, required=False, default="")
    team = serializers.CharField(required=False, default="", max_length=63)


def _first(text: str) -> Any:
    return selectors.month_of(text) if text else timezone.now().date().replace(day=1)


class SummaryView(APIView):
    """A month's showback: your teams' costs (approvers and platform admins: every team's,
    the fleet's total, its pools and queues) and the platform's line."""

    @extend_schema(parameters=[MonthQuery], responses={200: OpenApiTypes.OBJECT})
    def get(self, request: Request) -> Response:
        query = MonthQuery(data=request.query_params)
        query.is_valid(raise_exception=True)
        try:
            first = _first(query.validated_data["month"])
        except ValueError as bad:
            raise serializers.ValidationError({"month": [selectors.BAD_MONTH]}) from bad
        charge = selectors.chargeback_for_user(request.user, first, query.validated_data["team"])
        return Response(reports.summary(charge, sees_all=sees_every_team(request.user)))


class InvoiceQuery(StrictQuery):
    format = serializers.ChoiceField(choices=["json", "csv"], required=False, default="json")


class InvoiceView(APIView):
    """A team's invoice for a month (``YYYY-MM``): lines per cluster, namespace and resource,
    per day, the total and the policy. Another team than yours is a 404."""

    @extend_schema(
        parameters=[OpenApiParameter("format", str, enum=["json", "csv"])],
        responses={
            (200, "application/json"): OpenApiTypes.OBJECT,
            (200, "text/csv"): OpenApiTypes.STR,
        },
    )
    def get(self, request: Request, team: str, month: str) -> Response | HttpResponse:
        query = InvoiceQuery(data=request.query_params)
        query.is_valid(raise_exception=True)
        try:
            first = selectors.month_of(month)
        except ValueError as bad:
            raise Http404(selectors.BAD_MONTH) from bad
        charge = selectors.chargeback_for_user(request.user, first, team)
        bill = reports.invoice(charge, team)
        if query.validated_data["format"] == "csv":
            return HttpResponse(reports.invoice_csv(bill), content_type="text/csv; charset=utf-8")
        return Response(bill)
