"""REST API of diagnostics: what waits and why, open drift, and the GPU Operator check."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from django.conf import settings
from django.db.models import QuerySet
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from cluster.api_scope import CLUSTER_QUERY, ClusterQuery, ClusterScoped, cluster_field
from cluster.connection import interactive_gateway
from cluster.models import ObservedCreateFailure, ObservedPod, ObservedWorkload
from cluster.selectors import open_drift
from diagnostics.estimate import Estimate
from diagnostics.operator_check import CheckItem, check_gpu_operator
from diagnostics.selectors import explain_waiting, read_waiting
from kube import KubeError
from portal.access.permissions import sees_every_team
from portal.api.filters import allowed, no_such_team
from portal.vocabulary.names import PodNames
from tenants.models import Namespace, Team
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
        allow_null=True,
        help_text="Seconds from the cluster's last poll (which estimated it) until it could "
        "start at the earliest.",
    )
    high_s = serializers.IntegerField(
        allow_null=True,
        help_text="Seconds from the cluster's last poll until it should have started; null with "
        "low_s set: after a change of unknown length.",
    )
    earliest = serializers.DateTimeField(
        allow_null=True, help_text="The moment low_s is, rounded down to 5 minutes."
    )
    latest = serializers.DateTimeField(
        allow_null=True, help_text="The moment high_s is, rounded up to 5 minutes."
    )


class WaitingSerializer(serializers.Serializer[Any]):
    cluster = cluster_field(None)
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


class WaitingQuery(ClusterQuery):
    """``?team=`` and ``?namespace=`` among yours (on the cluster asked for, if one is): any
    other (none such, or another team's) is refused the same way, naming the ones that would
    do; ``?cluster=`` on the flat route."""

    namespace = serializers.CharField(required=False, max_length=63)
    team = serializers.CharField(required=False, max_length=63)

    def validate_team(self, value: str) -> str:
        slugs = list(self.context["teams"].values_list("slug", flat=True))
        if value not in slugs:
            raise serializers.ValidationError(no_such_team(slugs))
        return value

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        attrs = super().validate(attrs)
        if "namespace" not in attrs:
            return attrs
        namespaces = self.context["namespaces"]
        if attrs.get("cluster") is not None:
            namespaces = namespaces.filter(cluster=attrs["cluster"])
        names = sorted(set(namespaces.values_list("name", flat=True)))
        if attrs["namespace"] not in names:
            raise serializers.ValidationError(
                {
                    "namespace": [
                        f"No such namespace among your teams': use one of {allowed(names)}."
                        if names
                        else "No such namespace: your teams have none."
                    ]
                }
            )
        return attrs


class WaitingView(ClusterScoped, APIView):
    """What waits in your teams' namespaces (every team's for approvers and platform
    admins) and why, on each cluster: the cause, the next step, an action and the cluster's
    own words (the same explanations as the home page), and when it could start (a range
    with its basis, or "no estimate" and why)."""

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
            CLUSTER_QUERY,
        ],
        responses={200: WaitingSerializer(many=True)},
    )
    def get(self, request: Request) -> Response:
        # Approvers and platform admins read every team's (as on the pages); a team's
        # people, their own teams'.
        teams = (
            Team.objects.all()
            if sees_every_team(request.user)
            else list_teams_for_user(request.user).prefetch_related(None)
        )
        namespaces = self.in_cluster(Namespace.objects.filter(team__in=teams))
        query = WaitingQuery(
            data=request.query_params,
            context={"teams": teams, "namespaces": namespaces, "user": request.user},
        )
        query.is_valid(raise_exception=True)
        cluster = self.asked_cluster(query)
        if cluster is not None:
            namespaces = namespaces.filter(cluster=cluster)
        if query.validated_data.get("team"):
            namespaces = namespaces.filter(team__slug=query.validated_data["team"])
        if query.validated_data.get("namespace"):
            namespaces = namespaces.filter(name=query.validated_data["namespace"])
        rows = waiting_rows(namespaces, everyone=sees_every_team(request.user))
        return Response(WaitingSerializer(rows, many=True).data)


def waiting_rows(namespaces: QuerySet[Namespace], *, everyone: bool) -> list[dict[str, Any]]:
    """What waits in ``namespaces`` (the user's), each row naming its cluster: each cluster's
    namespaces as that cluster's poll explained them (a name another cluster has too may be
    another team's there, and its nodes and queues are not this one's), another team's pods
    named only to a user who sees ``everyone``'s (the pods of the namespaces shown are the
    user's own: no query more to know whose pods they may name)."""
    on_cluster: dict[tuple[int, str], list[str]] = defaultdict(list)
    for cid, name, on in namespaces.values_list("cluster_id", "name", "cluster__name"):
        on_cluster[(cid, on)].append(name)
    names = PodNames(
        everyone, frozenset((cid, n) for (cid, _), shown in on_cluster.items() for n in shown)
    )
    # Every cluster's rows in one round trip, however many clusters there are.
    read, pods = read_waiting(
        sorted((cid, n) for (cid, _), names_on in on_cluster.items() for n in names_on)
    )
    rows: list[dict[str, Any]] = []
    for (cid, on), names_on in sorted(on_cluster.items(), key=lambda item: item[0][1]):
        here = [p for p in pods if p.cluster_id == cid]
        found = explain_waiting(
            sorted(names_on), cluster_id=cid, names=names, pods=here, read=read.on(cid)
        )
        rows += _rows(on, *found)
    return rows


def _rows(
    on: str,
    workloads: list[ObservedWorkload],
    pods: list[ObservedPod],
    failures: list[ObservedCreateFailure],
) -> list[dict[str, Any]]:
    """The API's rows of what waits on the cluster named ``on``."""
    rows: list[dict[str, Any]] = []
    groups: list[tuple[str, list[Any]]] = [("Workload", workloads), ("Pod", pods), ("", failures)]
    for kind, found in groups:
        for item in found:
            why = item.why
            if why is None:
                continue
            rows.append(
                {
                    "cluster": on,
                    "kind": kind or item.kind,
                    "namespace": item.namespace,
                    "name": item.name,
                    **_queue_of(kind, item),
                    **_why(why),
                    "estimate": _estimate(item.estimate),
                }
            )
    return rows


def _queue_of(kind: str, item: Any) -> dict[str, str]:
    """The LocalQueue of a row and the Kueue Workload it is or runs for (none for a
    controller whose pods are refused)."""
    if kind == "Workload":
        return {"queue": item.queue_name, "workload": item.name}
    if kind == "Pod":
        return {"queue": item.queue_name, "workload": item.workload_name}
    return {"queue": getattr(item, "queue_name", ""), "workload": ""}


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
        query = ClusterQuery(data=request.query_params, context={"user": request.user})
        query.is_valid(raise_exception=True)
        drift = open_drift().select_related("cluster")
        cluster = self.asked_cluster(query)
        drift = drift.filter(cluster=cluster) if cluster is not None else self.in_cluster(drift)
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
