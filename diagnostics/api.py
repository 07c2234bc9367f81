"""REST API of diagnostics: what waits and why, open drift, and the GPU Operator check."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from cluster.connection import interactive_gateway
from cluster.selectors import open_drift
from diagnostics.estimate import Estimate
from diagnostics.operator_check import CheckItem, check_gpu_operator
from diagnostics.selectors import explain_waiting
from kube import KubeError
from portal.api_clusters import CLUSTER_QUERY, ClusterQuery, ClusterScoped, cluster_field
from portal.api_safety import StrictQuery
from portal.filters import allowed, no_such_team
from tenants.models import Namespace
from tenants.selectors import list_teams_for_user


class EstimateSerializer(serializers.Serializer[Any]):
    summary = serializers.CharField(
        help_text='The range ("about 2-3 h", with an en dash), what it waits for ("after MIG '
        'change #12"), or "no estimate".'
    )
    basis = serializers.CharField(
        help_text="What the range rests on (its place in line, the run times of those ahead), "
        "or why there is no estimate."
    )
    low_s = serializers.IntegerField(
        allow_null=True, help_text="Seconds from now until it could start at the earliest."
    )
    high_s = serializers.IntegerField(
        allow_null=True,
        help_text="Seconds from now until it should have started; null with low_s set: after a "
        "change of unknown length.",
    )
    earliest = serializers.DateTimeField(
        allow_null=True, help_text="The moment low_s is, rounded down to 5 minutes."
    )
    latest = serializers.DateTimeField(
        allow_null=True, help_text="The moment high_s is, rounded up to 5 minutes."
    )


class WaitingSerializer(serializers.Serializer[Any]):
    kind = serializers.CharField(
        help_text="Pod, Workload, or the controller that cannot create its pods (Job, ...)."
    )
    namespace = serializers.CharField()
    name = serializers.CharField()
    queue = serializers.CharField(allow_blank=True)
    workload = serializers.CharField(
        allow_blank=True,
        help_text="The Kueue Workload a pod runs for (Kueue names it on the pods it admits).",
    )
    cause = serializers.CharField()
    next_step = serializers.CharField()
    action = serializers.DictField(child=serializers.CharField(), allow_null=True)
    evidence = serializers.ListField(child=serializers.CharField())
    estimate = EstimateSerializer(
        allow_null=True,
        help_text="When it could start: a range from its place in line and the run times of "
        "what is ahead, from the queue's history (the same words as the home page); null for "
        "a workload Kueue admitted (its stuck pod has one).",
    )


class WaitingQuery(StrictQuery):
    """``?team=`` and ``?namespace=`` among yours: any other (none such, or another team's)
    is refused the same way, naming the ones that would do."""

    namespace = serializers.CharField(required=False, max_length=63)
    team = serializers.CharField(required=False, max_length=63)

    def validate_team(self, value: str) -> str:
        slugs = list(self.context["teams"].values_list("slug", flat=True))
        if value not in slugs:
            raise serializers.ValidationError(no_such_team(slugs))
        return value

    def validate_namespace(self, value: str) -> str:
        names = list(self.context["namespaces"].values_list("name", flat=True))
        if value not in names:
            raise serializers.ValidationError(
                f"No such namespace among your teams': use one of {allowed(names)}."
                if names
                else "No such namespace: your teams have none."
            )
        return value


class WaitingView(APIView):
    """What waits in your teams' namespaces and why: the cause, the next step, an action
    and the cluster's own words (the same explanations as the home page), and when it could
    start (a range with its basis, or "no estimate" and why)."""

    @extend_schema(
        parameters=[
            OpenApiParameter(
                "namespace",
                str,
                description="Only this namespace, one of your teams' (another is a 400 naming "
                "`namespace`).",
            ),
            OpenApiParameter(
                "team",
                str,
                description="Only this team's namespaces, one of your teams (another, or one "
                "that does not exist, is a 400 naming `team`).",
            ),
        ],
        responses={200: WaitingSerializer(many=True)},
    )
    def get(self, request: Request) -> Response:
        teams = list_teams_for_user(request.user).prefetch_related(None)
        namespaces = Namespace.objects.filter(team__in=teams).order_by("name")
        query = WaitingQuery(
            data=request.query_params, context={"teams": teams, "namespaces": namespaces}
        )
        query.is_valid(raise_exception=True)
        if query.validated_data.get("team"):
            namespaces = namespaces.filter(team__slug=query.validated_data["team"])
        if query.validated_data.get("namespace"):
            namespaces = namespaces.filter(name=query.validated_data["namespace"])
        workloads, pods, failures = explain_waiting(list(namespaces.values_list("name", flat=True)))
        rows = (
            [
                {
                    "kind": "Workload",
                    "namespace": w.namespace,
                    "name": w.name,
                    "queue": w.queue_name,
                    "workload": w.name,
                    **_why(w.why),  # type: ignore[attr-defined]
                    "estimate": _estimate(w.estimate),  # type: ignore[attr-defined]
                }
                for w in workloads
                if w.why is not None  # type: ignore[attr-defined]
            ]
            + [
                {
                    "kind": "Pod",
                    "namespace": p.namespace,
                    "name": p.name,
                    "queue": p.queue_name,
                    "workload": p.workload_name,
                    **_why(p.why),  # type: ignore[attr-defined]
                    "estimate": _estimate(p.estimate),  # type: ignore[attr-defined]
                }
                for p in pods
            ]
            + [
                {
                    "kind": f.kind,
                    "namespace": f.namespace,
                    "name": f.name,
                    "queue": "",
                    "workload": "",
                    **_why(f.why),  # type: ignore[attr-defined]
                    "estimate": _estimate(f.estimate),  # type: ignore[attr-defined]
                }
                for f in failures
            ]
        )
        return Response(WaitingSerializer(rows, many=True).data)


def _estimate(estimate: Estimate | None) -> dict[str, Any] | None:
    if estimate is None:
        return None
    return {
        "summary": estimate.summary,
        "basis": estimate.basis,
        "low_s": estimate.low_s,
        "high_s": estimate.high_s,
        "earliest": estimate.earliest,
        "latest": estimate.latest,
    }


def _why(why: Any) -> dict[str, Any]:
    return {
        "cause": why.cause,
        "next_step": why.next_step,
        "action": why.action,
        "evidence": list(why.evidence),
    }


class DriftSerializer(serializers.Serializer[Any]):
    cluster = cluster_field(None)
    kind = serializers.CharField()
    subject = serializers.CharField()
    field = serializers.CharField(allow_blank=True)
    intended = serializers.CharField(allow_blank=True)
    observed = serializers.CharField(allow_blank=True)
    detail = serializers.CharField(allow_blank=True)
    since = serializers.DateTimeField()
    last_seen = serializers.DateTimeField()


class DriftView(ClusterScoped, APIView):
    """Open drift: MIG layouts, node labels and the portal's objects that differ from what
    the portal intends, with since when, on each cluster."""

    @extend_schema(parameters=[CLUSTER_QUERY], responses={200: DriftSerializer(many=True)})
    def get(self, request: Request) -> Response:
        query = ClusterQuery(data=request.query_params)
        query.is_valid(raise_exception=True)
        drift = open_drift().select_related("cluster")
        cluster = self.asked_cluster(query)
        if cluster is not None:
            drift = drift.filter(cluster=cluster)
        return Response(
            [
                {
                    "cluster": d.cluster.name,
                    "kind": d.kind,
                    "subject": d.subject,
                    "field": d.field,
                    "intended": d.desired,
                    "observed": d.observed,
                    "detail": d.detail,
                    "since": d.first_seen,
                    "last_seen": d.last_seen,
                }
                for d in drift
            ]
        )


class CheckItemSerializer(serializers.Serializer[Any]):
    name = serializers.CharField()
    ok = serializers.BooleanField()
    detail = serializers.CharField()
    fix = serializers.CharField(allow_blank=True)


class OperatorCheckSerializer(serializers.Serializer[Any]):
    namespace = serializers.CharField()
    passed = serializers.BooleanField()
    items = CheckItemSerializer(many=True)


class OperatorCheckView(APIView):
    """The GPU Operator post-install checklist, run against the cluster now: each item
    passes or fails with the fix to try (the same as the GPU Operator check page)."""

    @extend_schema(responses={200: OperatorCheckSerializer})
    def get(self, request: Request) -> Response:
        try:
            items = check_gpu_operator(
                interactive_gateway(), namespace=settings.QM_GPU_OPERATOR_NAMESPACE
            )
        except KubeError as exc:
            items = [
                CheckItem(
                    "The Kubernetes API answers",
                    False,
                    exc.message,
                    "Check KUBE_URL / KUBECONFIG / KUBE_IN_CLUSTER and that the portal's "
                    "credentials are valid (GET /readyz shows the same).",
                )
            ]
        return Response(
            {
                "namespace": settings.QM_GPU_OPERATOR_NAMESPACE,
                "passed": all(i.ok for i in items),
                "items": [
                    {"name": i.name, "ok": i.ok, "detail": i.detail, "fix": i.fix} for i in items
                ],
            }
        )
