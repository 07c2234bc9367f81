"""The reports over the REST API: the same rows as the pages, as JSON or CSV."""

from __future__ import annotations

from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from portal.api_safety import StrictQuery
from usage import reports
from usage.views import DAYS, as_csv, report_rows, team_scope


class ReportQuery(StrictQuery):
    days = serializers.ChoiceField(choices=DAYS, required=False, default=7)
    format = serializers.ChoiceField(choices=["json", "csv"], required=False, default="json")


class ReportView(APIView):
    """A usage report over the last ``days`` (1, 7, 30 or 90): gpu-hours, queue-gpu-hours,
    quota-utilisation, wait-times, borrowing, idle-capacity or usage-over-time. Team reports
    cover your teams (approvers and platform admins: every team). ``format=csv`` for
    chargeback."""

    @extend_schema(
        parameters=[
            OpenApiParameter(
                "name",
                str,
                OpenApiParameter.PATH,
                enum=sorted(reports.REPORTS),
                description="The report (another name is a 404).",
            ),
            OpenApiParameter("days", int, enum=list(DAYS)),
            OpenApiParameter("format", str, enum=["json", "csv"]),
        ],
        responses={
            (200, "application/json"): {"type": "array", "items": {"type": "object"}},
            (200, "text/csv"): OpenApiTypes.STR,
        },
    )
    def get(self, request: Request, name: str) -> Response | HttpResponse:
        query = ReportQuery(data=request.query_params)
        query.is_valid(raise_exception=True)
        period = reports.Period.last(int(query.validated_data["days"]))
        rows = report_rows(name, period, team_scope(request.user))
        if query.validated_data["format"] == "csv":
            return HttpResponse(as_csv(rows), content_type="text/csv; charset=utf-8")
        return Response(rows)
