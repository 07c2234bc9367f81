"""REST API of the fleet: observed nodes, node pools, MIG configs, MIG change requests."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from fleet import changes
from fleet.models import MigChangeRequest, MigChangeStep, NodePool, ObservedNode
from portal.api_safety import StrictInput, check_if_match, etag_of, idempotent
from tenants.models import Team


class NodeSerializer(serializers.ModelSerializer[ObservedNode]):
    class Meta:
        model = ObservedNode
        fields = [
            "name",
            "gpu_product",
            "gpu_count",
            "mig_capable",
            "mig_strategy",
            "mig_config",
            "mig_config_state",
            "pool_label",
            "capacity",
            "allocatable",
            "allocated",
            "taints",
            "unschedulable",
            "ready",
            "first_seen",
            "last_changed",
            "gone_since",
        ]


class NodeViewSet(viewsets.ReadOnlyModelViewSet[ObservedNode]):
    """GPU nodes as the last poll saw them (observed state, read-only)."""

    serializer_class = NodeSerializer
    lookup_field = "name"
    lookup_value_regex = "[^/]+"
    filterset_fields = [
        "gpu_product",
        "mig_config",
        "mig_config_state",
        "pool_label",
        "unschedulable",
    ]
    ordering_fields = ["name", "last_changed"]

    def get_queryset(self) -> Any:
        # Only the columns shown: labels and the poller's bookkeeping stay in the database.
        return (
            ObservedNode.objects.filter(gone_since__isnull=True)
            .only(*NodeSerializer.Meta.fields)
            .order_by("name")
        )


class NodePoolSerializer(serializers.ModelSerializer[NodePool]):
    class Meta:
        model = NodePool
        fields = ["name", "node_selector", "purpose", "mig_config", "description"]


class NodePoolViewSet(viewsets.ReadOnlyModelViewSet[NodePool]):
    serializer_class = NodePoolSerializer
    queryset = NodePool.objects.all()
    lookup_field = "name"


class StepSerializer(serializers.ModelSerializer[MigChangeStep]):
    class Meta:
        model = MigChangeStep
        fields = ["round", "node", "step", "status", "message", "started_at", "finished_at"]


class MigChangeSerializer(serializers.ModelSerializer[MigChangeRequest]):
    team = serializers.SlugRelatedField(slug_field="slug", read_only=True, allow_null=True)
    requested_by = serializers.CharField(
        source="requested_by.get_username",
        read_only=True,
        default=None,
        help_text="Empty for a drain the portal suggested (GPU health).",
    )
    decided_by = serializers.CharField(
        source="decided_by.get_username", read_only=True, default=None
    )
    steps = StepSerializer(many=True, read_only=True)

    class Meta:
        model = MigChangeRequest
        fields = [
            "id",
            "kind",
            "team",
            "nodes",
            "target_config",
            "reason",
            "window_start",
            "state",
            "verdict",
            "assessment",
            "queue_changes",
            "previous_configs",
            "requested_by",
            "decided_by",
            "decision_comment",
            "decided_at",
            "failure",
            "created_at",
            "steps",
        ]


class MigChangeCreateSerializer(StrictInput, serializers.Serializer[Any]):
    team = serializers.SlugField()
    nodes = serializers.ListField(child=serializers.CharField(max_length=253), allow_empty=True)
    target_config = serializers.CharField(max_length=63)
    reason = serializers.CharField(allow_blank=True)
    window_start = serializers.DateTimeField(required=False, allow_null=True)


class PreviewSerializer(StrictInput, serializers.Serializer[Any]):
    nodes = serializers.ListField(child=serializers.CharField(max_length=253), allow_empty=False)
    target_config = serializers.CharField(max_length=63)


class DecisionSerializer(StrictInput, serializers.Serializer[Any]):
    comment = serializers.CharField(allow_blank=True, required=False, default="")


class MigChangeViewSet(mixins.CreateModelMixin, viewsets.ReadOnlyModelViewSet[MigChangeRequest]):
    """MIG change requests of your teams (all of them for approvers and admins)."""

    serializer_class = MigChangeSerializer
    filterset_fields = ["kind", "state", "verdict", "target_config"]

    def get_queryset(self) -> Any:
        return changes.list_mig_changes_for_user(self.request.user).prefetch_related("steps")

    def retrieve(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        instance = self.get_object()
        response = Response(self.get_serializer(instance).data)
        response["ETag"] = etag_of(instance.pk, instance.state, instance.updated_at.isoformat())
        return response

    @extend_schema(request=MigChangeCreateSerializer, responses={201: MigChangeSerializer})
    @idempotent
    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        data = MigChangeCreateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        team = (
            changes.teams_user_may_request_for(request.user)
            .filter(slug=data.validated_data["team"])
            .first()
        )
        if team is None:
            if Team.objects.filter(slug=data.validated_data["team"]).exists():
                from django.core.exceptions import PermissionDenied

                raise PermissionDenied(
                    "Only the team's lead or a platform admin can ask for a MIG change."
                )
            from django.core.exceptions import ValidationError

            raise ValidationError({"team": ["No such team."]})
        created = changes.request_mig_change(
            actor=request.user,
            team=team,
            nodes=data.validated_data["nodes"],
            target_config=data.validated_data["target_config"],
            reason=data.validated_data["reason"],
            window_start=data.validated_data.get("window_start"),
            source="api",
        )
        return Response(MigChangeSerializer(created).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=PreviewSerializer, responses={200: dict})
    @action(detail=False, methods=["post"])
    def preview(self, request: Request) -> Response:
        """The impact assessment of a change, nothing saved (team leads, approvers, admins)."""
        if not changes.may_preview(request.user):
            from django.core.exceptions import PermissionDenied

            raise PermissionDenied(
                "Only team leads, approvers and platform admins preview changes."
            )
        data = PreviewSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        return Response(
            changes.preview(
                nodes=data.validated_data["nodes"], config=data.validated_data["target_config"]
            )
        )

    @idempotent
    def _decide(self, request: Request, pk: str, verb: str) -> Response:
        current = changes.get_mig_change_for_user(request.user, int(pk))
        refused = check_if_match(
            request, etag_of(current.pk, current.state, current.updated_at.isoformat())
        )
        if refused is not None:
            return refused
        data = DecisionSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        comment = data.validated_data["comment"]
        if verb == "approve":
            changes.approve_mig_change(
                request_id=int(pk), approver=request.user, comment=comment, source="api"
            )
        elif verb == "reject":
            changes.reject_mig_change(
                request_id=int(pk), approver=request.user, comment=comment, source="api"
            )
        elif verb == "cancel":
            changes.cancel_mig_change(request_id=int(pk), actor=request.user, source="api")
        else:
            changes.rollback_mig_change(request_id=int(pk), actor=request.user, source="api")
        return Response(
            MigChangeSerializer(changes.get_mig_change_for_user(request.user, int(pk))).data
        )

    @extend_schema(request=DecisionSerializer, responses={200: MigChangeSerializer})
    @action(detail=True, methods=["post"])
    def approve(self, request: Request, pk: str) -> Response:
        return self._decide(request, pk, "approve")

    @extend_schema(request=DecisionSerializer, responses={200: MigChangeSerializer})
    @action(detail=True, methods=["post"])
    def reject(self, request: Request, pk: str) -> Response:
        return self._decide(request, pk, "reject")

    @extend_schema(request=None, responses={200: MigChangeSerializer})
    @action(detail=True, methods=["post"])
    def cancel(self, request: Request, pk: str) -> Response:
        return self._decide(request, pk, "cancel")

    @extend_schema(request=None, responses={200: MigChangeSerializer})
    @action(detail=True, methods=["post"])
    def rollback(self, request: Request, pk: str) -> Response:
        return self._decide(request, pk, "rollback")


class MigConfigsViewSet(viewsets.ViewSet):
    """MIG configs a node's GPU model can take (standard and custom)."""

    @extend_schema(parameters=[OpenApiParameter("node", str, required=True)], responses={200: dict})
    def list(self, request: Request) -> Response:
        from fleet.impact import valid_configs

        facts = changes.fleet_facts()
        name = request.query_params.get("node", "")
        node = next((n for n in facts.nodes if n.name == name), None)
        if node is None:
            from django.http import Http404

            raise Http404
        return Response({"node": name, "model": node.model, "configs": valid_configs(node, facts)})


class WaitingSerializer(serializers.Serializer[Any]):
    kind = serializers.CharField(
        help_text="Pod, Workload, or the controller that cannot create its pods (Job, ...)."
    )
    namespace = serializers.CharField()
    name = serializers.CharField()
    queue = serializers.CharField(allow_blank=True)
    cause = serializers.CharField()
    next_step = serializers.CharField()
    action = serializers.DictField(child=serializers.CharField(), allow_null=True)
    evidence = serializers.ListField(child=serializers.CharField())


class WaitingQuery(serializers.Serializer[Any]):
    namespace = serializers.CharField(required=False, max_length=63)
    team = serializers.CharField(required=False, max_length=63)


class WaitingView(APIView):
    """What waits in your teams' namespaces and why: the cause, the next step, an action
    and the cluster's own words (the same explanations as the home page)."""

    @extend_schema(
        parameters=[
            OpenApiParameter("namespace", str, description="Only this namespace."),
            OpenApiParameter("team", str, description="Only this team's namespaces."),
        ],
        responses={200: WaitingSerializer(many=True)},
    )
    def get(self, request: Request) -> Response:
        from fleet.selectors import explain_waiting
        from tenants.models import Namespace
        from tenants.selectors import list_teams_for_user

        query = WaitingQuery(data=request.query_params)
        query.is_valid(raise_exception=True)
        namespaces = Namespace.objects.filter(team__in=list_teams_for_user(request.user))
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
                    **_why(w.why),  # type: ignore[attr-defined]
                }
                for w in workloads
                if not w.admitted
            ]
            + [
                {
                    "kind": "Pod",
                    "namespace": p.namespace,
                    "name": p.name,
                    "queue": "",
                    **_why(p.why),
                }  # type: ignore[attr-defined]
                for p in pods
            ]
            + [
                {
                    "kind": f.kind,
                    "namespace": f.namespace,
                    "name": f.name,
                    "queue": "",
                    **_why(f.why),
                }
                for f in failures
            ]
        )
        return Response(WaitingSerializer(rows, many=True).data)


def _why(why: Any) -> dict[str, Any]:
    return {
        "cause": why.cause,
        "next_step": why.next_step,
        "action": why.action,
        "evidence": list(why.evidence),
    }


class NodeHealthSerializer(serializers.Serializer[Any]):
    node = serializers.CharField()
    observed_at = serializers.DateTimeField()
    error = serializers.CharField(allow_blank=True)
    worst = serializers.ChoiceField(choices=["ok", "info", "warning", "critical"])
    findings = serializers.ListField(child=serializers.DictField())
    gpus = serializers.ListField(child=serializers.DictField())


class DriftSerializer(serializers.Serializer[Any]):
    kind = serializers.CharField()
    subject = serializers.CharField()
    field = serializers.CharField(allow_blank=True)
    intended = serializers.CharField(allow_blank=True)
    observed = serializers.CharField(allow_blank=True)
    detail = serializers.CharField(allow_blank=True)
    since = serializers.DateTimeField()
    last_seen = serializers.DateTimeField()


class CheckItemSerializer(serializers.Serializer[Any]):
    name = serializers.CharField()
    ok = serializers.BooleanField()
    detail = serializers.CharField()
    fix = serializers.CharField(allow_blank=True)


class OperatorCheckSerializer(serializers.Serializer[Any]):
    namespace = serializers.CharField()
    passed = serializers.BooleanField()
    items = CheckItemSerializer(many=True)


class HealthQuery(serializers.Serializer[Any]):
    node = serializers.CharField(required=False, max_length=253)
    worst = serializers.ChoiceField(choices=["ok", "info", "warning", "critical"], required=False)


class GpuHealthView(APIView):
    """GPU health per node from the DCGM exporters: utilisation, memory, temperature, power,
    the last Xid per GPU and per MIG instance, and what needs attention. Pods of other teams
    are not named (approvers and platform admins see every name)."""

    @extend_schema(
        parameters=[
            OpenApiParameter("node", str, description="Only this node."),
            OpenApiParameter(
                "worst", str, description="Only nodes at this level: ok, info, warning, critical."
            ),
        ],
        responses={200: NodeHealthSerializer(many=True)},
    )
    def get(self, request: Request) -> Response:
        from fleet.models import NodeHealth
        from portal.permissions import is_approver, is_platform_admin
        from tenants.models import Namespace

        query = HealthQuery(data=request.query_params)
        query.is_valid(raise_exception=True)
        rows = NodeHealth.objects.all()
        if query.validated_data.get("node"):
            rows = rows.filter(node=query.validated_data["node"])
        if query.validated_data.get("worst"):
            rows = rows.filter(worst=query.validated_data["worst"])
        sees_all = is_platform_admin(request.user) or is_approver(request.user)
        mine = set(
            Namespace.objects.filter(team__memberships__user_id=request.user.pk).values_list(
                "name", flat=True
            )
        )

        def scoped(item: dict[str, Any]) -> dict[str, Any]:
            if item.get("pod") and not sees_all and item.get("namespace") not in mine:
                return {**item, "namespace": "", "pod": "(another team's pod)"}
            return item

        return Response(
            [
                {
                    "node": row.node,
                    "observed_at": row.observed_at,
                    "error": row.error,
                    "worst": row.worst,
                    "findings": row.findings,
                    "gpus": [
                        {**scoped(g), "instances": [scoped(i) for i in g.get("instances", [])]}
                        for g in row.gpus
                    ],
                }
                for row in rows.order_by("node")
            ]
        )


class DriftView(APIView):
    """Open drift: MIG layouts, node labels and the portal's objects that differ from what
    the portal intends, with since when."""

    @extend_schema(responses={200: DriftSerializer(many=True)})
    def get(self, request: Request) -> Response:
        from fleet.selectors import open_drift

        return Response(
            [
                {
                    "kind": d.kind,
                    "subject": d.subject,
                    "field": d.field,
                    "intended": d.desired,
                    "observed": d.observed,
                    "detail": d.detail,
                    "since": d.first_seen,
                    "last_seen": d.last_seen,
                }
                for d in open_drift()
            ]
        )


class OperatorCheckView(APIView):
    """The GPU Operator post-install checklist, run against the cluster now: each item
    passes or fails with the fix to try (the same as the GPU Operator check page)."""

    @extend_schema(responses={200: OperatorCheckSerializer})
    def get(self, request: Request) -> Response:
        from django.conf import settings

        from fleet.operator_check import CheckItem, check_gpu_operator
        from kube import KubeError
        from portal.gateway import get_gateway

        try:
            items = check_gpu_operator(get_gateway(), namespace=settings.QM_GPU_OPERATOR_NAMESPACE)
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
