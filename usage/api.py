"""The reports over the REST API: the same rows as the pages, as JSON or CSV."""

from __future__ import annotations

from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from portal.api.safety import StrictQuery
from usage import reports
from usage.exports import as_csv, cluster_named, report_rows
from usage.forms import DAYS
from usage.views import requested_teams


class ReportQuery(StrictQuery):
    days = serializers.ChoiceField(choices=DAYS, required=False, default=7)
    format = serializers.ChoiceField(choices=["json", "csv"], required=False, default="json")
    team = serializers.CharField(required=False, default="", max_length=63)
    resource = serializers.CharField(required=False, default="", max_length=128)
    cluster = serializers.CharField(required=False, default="", max_length=63)


class ReportView(APIView):
    """A usage report over the last ``days`` (1: 24 hours, hourly; 7, 30 or 90: daily, today
    so far included): gpu-hours, queue-gpu-hours, quota-utilisation, wait-times, borrowing,
    idle-capacity or usage-over-time (a Usage page chart's data: ``team`` and ``resource``
    give one chart's). Team reports cover your teams (approvers and platform admins: every
    team), ``team`` one of them (another is a 404). ``resource`` keeps one resource's rows
    (a report without a resource column answers 400). ``format=csv`` for chargeback."""

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
            OpenApiParameter("team", str, description="One of your teams (its slug)."),
            OpenApiParameter(
                "cluster",
                str,
                description="One cluster (its name); none: every cluster. Another name is a"
                " 400 naming it.",
            ),
            OpenApiParameter(
                "resource",
                str,
                description="One resource, e.g. nvidia.com/mig-3g.40gb; only for the reports"
                f" with a resource column ({', '.join(sorted(reports.RESOURCE_COLUMN))}): on the"
                " others a 400 naming it.",
            ),
        ],
        responses={
            (200, "application/json"): {"type": "array", "items": {"type": "object"}},
            (200, "text/csv"): OpenApiTypes.STR,
        },
    )
    def get(self, request: Request, name: str) -> Response | HttpResponse:
        query = ReportQuery(data=request.query_params)
        query.is_valid(raise_exception=True)
        data = query.validated_data
        period = reports.last_days(int(data["days"]))
        teams = requested_teams(request.user, data["team"])
        cluster = cluster_named(data["cluster"])
        rows = report_rows(name, period, teams, data["resource"], cluster=cluster)
        if query.validated_data["format"] == "csv":
            return HttpResponse(as_csv(rows), content_type="text/csv; charset=utf-8")
        return Response(rows)
