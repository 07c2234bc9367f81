"""REST API of reviewed changes: MIG change and drain requests (create, preview, approve,
reject, cancel, roll back) and quota requests (create, approve, reject)."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import PermissionDenied, ValidationError
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from changes import mig, mig_policy, quota, selectors
from changes.approval import may_preview, team_to_ask_for
from changes.decisions import Asked, decide
from changes.filters import MigChangeFilter, QuotaRequestFilter
from changes.models import (
    MigChangeRequest,
    MigChangeStep,
    MigPolicyChange,
    QuotaChangeRequest,
)
from changes.quota import shown_fingerprint
from cluster.api_scope import known_cluster_names, no_such_cluster
from cluster.models import Cluster, ObservedNode
from cluster.scope import cluster_id_of
from portal.access.selectors import pod_names_for
from portal.api.safety import (
    IDEMPOTENCY_KEY,
    IF_MATCH,
    BoundedList,
    StrictInput,
    check_if_match,
    etag_of,
    idempotent,
)
from portal.vocabulary.validators import validate_not_past
from queues.models import ClusterQueue
from tenants.models import Namespace

CLUSTER_HELP = (
    "The cluster's name. Required when more than one cluster is registered (a node, a "
    "namespace or a ClusterQueue of one name may be on several)."
)


def cluster_named(name: str, user: Any) -> Cluster | None:
    """The cluster called ``name`` (None for no name); a field error naming the clusters
    that would do, of those ``user`` may know of, for any other."""
    if not name:
        return None
    found = Cluster.objects.filter(name=name).first()
    if found is None:
        raise ValidationError({"cluster": [no_such_cluster(known_cluster_names(user))]})
    return found


def _one_named(
    rows: Any, name: str, cluster: Cluster | None, *, field: str, mine: dict[str, Any]
) -> Any:
    """The namespace or ClusterQueue called ``name`` on ``cluster`` (None when there is
    none: the service says so); without a cluster, the one of that name, preferring the
    team's (``mine``), and a field error when several clusters have one."""
    if not name:
        return None
    rows = rows.filter(name=name)
    if cluster is not None:
        return rows.filter(cluster=cluster).first()
    found = list(rows.select_related("cluster")[:10])
    if len(found) > 1:
        found = list(rows.filter(**mine).distinct().select_related("cluster")[:10]) or found
    if len(found) > 1:
        where = ", ".join(sorted(row.cluster.name for row in found))
        raise ValidationError({"cluster": [f"The {field} {name} is on {where}: say which."]})
    return found[0] if found else None


class StepSerializer(serializers.ModelSerializer[MigChangeStep]):
    class Meta:
        model = MigChangeStep
        fields = [
            "round",
            "node",
            "step",
            "status",
            "message",
            "pods",
            "started_at",
            "finished_at",
        ]


class MigChangeSerializer(serializers.ModelSerializer[MigChangeRequest]):
    team: serializers.SlugRelatedField[Any] = serializers.SlugRelatedField(
        slug_field="slug", read_only=True, allow_null=True
    )
    requested_by = serializers.CharField(
        source="requested_by.get_username",
        read_only=True,
        default=None,
        allow_null=True,
        help_text="Null for a drain the portal suggested (GPU health).",
    )
    decided_by = serializers.CharField(
        source="decided_by.get_username",
        read_only=True,
        default=None,
        allow_null=True,
        help_text="Null until someone decides.",
    )
    steps = StepSerializer(many=True, read_only=True)
    pool: serializers.SlugRelatedField[Any] = serializers.SlugRelatedField(
        slug_field="name", read_only=True, allow_null=True
    )
    pool_name = serializers.CharField(
        source="pool_label", read_only=True, help_text="The node pool's name, also once deleted."
    )
    cluster: serializers.SlugRelatedField[Any] = serializers.SlugRelatedField(
        slug_field="name", read_only=True, help_text="The cluster the nodes are on."
    )

    class Meta:
        model = MigChangeRequest
        fields = [
            "id",
            "kind",
            "cluster",
            "team",
            "nodes",
            "pool",
            "pool_name",
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
            "teams_hit",
        ]

    teams_hit: serializers.SlugRelatedField[Any] = serializers.SlugRelatedField(
        slug_field="slug", many=True, read_only=True
    )

    def to_representation(self, instance: MigChangeRequest) -> dict[str, Any]:
        """Other teams' pods counted, never named (as on the pages)."""
        data: dict[str, Any] = super().to_representation(instance)
        request = self.context.get("request")
        if request is None:
            return data
        names = pod_names_for(request.user)
        on = cluster_id_of(instance.cluster_id)
        data["assessment"] = selectors.assessment_for(names, data["assessment"], on)
        data["failure"] = names.redact(data["failure"], on)
        for step in data.get("steps") or []:
            step["message"] = names.redact(step["message"], on)
            step["pods"] = [names.redact(pod, on) for pod in step["pods"]]
        return data


def fleet_node_count() -> int:
    """The nodes of every cluster: no change names more (each cluster's own count is the
    service's check)."""
    return ObservedNode.objects.on_every_cluster().filter(gone_since__isnull=True).count()


class MigChangeCreateSerializer(StrictInput, serializers.Serializer[Any]):
    cluster = serializers.CharField(
        required=False, allow_blank=True, default="", max_length=63, help_text=CLUSTER_HELP
    )
    team = serializers.SlugField()
    nodes = BoundedList(
        most=fleet_node_count,
        noun="node name",
        checked=mig.NAMES_CHECKED,
        child=serializers.CharField(max_length=253),
        allow_empty=True,
    )
    target_config = serializers.CharField(max_length=63)
    reason = serializers.CharField(allow_blank=True)
    window_start = serializers.DateTimeField(
        required=False, allow_null=True, validators=[validate_not_past]
    )


class PreviewSerializer(StrictInput, serializers.Serializer[Any]):
    cluster = serializers.CharField(
        required=False, allow_blank=True, default="", max_length=63, help_text=CLUSTER_HELP
    )
    nodes = BoundedList(
        most=fleet_node_count,
        noun="node name",
        checked=mig.NAMES_CHECKED,
        child=serializers.CharField(max_length=253),
        allow_empty=False,
    )
    target_config = serializers.CharField(max_length=63)


class DecisionSerializer(StrictInput, serializers.Serializer[Any]):
    comment = serializers.CharField(allow_blank=True, required=False, default="")
    fingerprint = serializers.CharField(
        required=False,
        allow_blank=True,
        default="",
        max_length=64,
        help_text="Approve: the assessment's fingerprint you decided on (default: the stored "
        "one). When a fresh assessment differs, the approval is refused (409 "
        "stale_assessment) and the new assessment stored.",
    )


class MigChangeViewSet(mixins.CreateModelMixin, viewsets.ReadOnlyModelViewSet[MigChangeRequest]):
    """MIG change requests of your teams (all of them for approvers and admins)."""

    serializer_class = MigChangeSerializer
    lookup_value_regex = r"\d+"  # an id that is no number is a 404, not a 500
    filterset_class = MigChangeFilter

    def get_queryset(self) -> Any:
        return selectors.list_mig_changes_for_user(self.request.user).prefetch_related(
            "steps", "teams_hit"
        )

    def retrieve(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        instance = self.get_object()
        response = Response(self.get_serializer(instance).data)
        response["ETag"] = mig_change_etag(instance)
        return response

    @extend_schema(
        request=MigChangeCreateSerializer,
        responses={201: MigChangeSerializer},
        parameters=[IDEMPOTENCY_KEY],
    )
    @idempotent
    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        data = MigChangeCreateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        team = team_to_ask_for(request.user, data.validated_data["team"], "a MIG change")
        created = mig.request_mig_change(
            actor=request.user,
            team=team,
            cluster=cluster_named(data.validated_data["cluster"], request.user),
            nodes=data.validated_data["nodes"],
            target_config=data.validated_data["target_config"],
            reason=data.validated_data["reason"],
            window_start=data.validated_data.get("window_start"),
            source="api",
        )
        return Response(
            MigChangeSerializer(created, context={"request": request}).data,
            status=status.HTTP_201_CREATED,
        )

    @extend_schema(request=PreviewSerializer, responses={200: dict})
    @action(detail=False, methods=["post"])
    def preview(self, request: Request) -> Response:
        """The impact assessment of a change, nothing saved (team leads, approvers, admins)."""
        if not may_preview(request.user):
            raise PermissionDenied("Only team leads, approvers and platform admins preview mig.")
        data = PreviewSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        return Response(
            mig.preview(
                viewer=request.user,
                nodes=data.validated_data["nodes"],
                config=data.validated_data["target_config"],
                cluster=mig.change_cluster(
                    None,
                    cluster_named(data.validated_data["cluster"], request.user),
                    data.validated_data["nodes"],
                    viewer=request.user,
                ),
            )
        )

    @idempotent
    def _decide(self, request: Request, pk: str, verb: str) -> Response:
        current = selectors.get_mig_change_for_user(request.user, int(pk))
        refused = check_if_match(request, mig_change_etag(current))
        if refused is not None:
            return refused
        data = DecisionSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        decide("mig", verb, _asked(request, pk, data.validated_data))
        decided = selectors.get_mig_change_for_user(request.user, int(pk))
        return Response(MigChangeSerializer(decided, context={"request": request}).data)

    @extend_schema(
        request=DecisionSerializer,
        responses={200: MigChangeSerializer},
        parameters=[IF_MATCH, IDEMPOTENCY_KEY],
    )
    @action(detail=True, methods=["post"])
    def approve(self, request: Request, pk: str) -> Response:
        return self._decide(request, pk, "approve")

    @extend_schema(
        request=DecisionSerializer,
        responses={200: MigChangeSerializer},
        parameters=[IF_MATCH, IDEMPOTENCY_KEY],
    )
    @action(detail=True, methods=["post"])
    def reject(self, request: Request, pk: str) -> Response:
        return self._decide(request, pk, "reject")

    @extend_schema(
        request=None, responses={200: MigChangeSerializer}, parameters=[IF_MATCH, IDEMPOTENCY_KEY]
    )
    @action(detail=True, methods=["post"])
    def cancel(self, request: Request, pk: str) -> Response:
        """The requester or a platform admin: withdraw a request that has not started. It
        acts at once: the call is its own confirmation (the pages ask first)."""
        return self._decide(request, pk, "cancel")

    @extend_schema(
        request=None, responses={200: MigChangeSerializer}, parameters=[IF_MATCH, IDEMPOTENCY_KEY]
    )
    @action(detail=True, methods=["post"])
    def rollback(self, request: Request, pk: str) -> Response:
        """Platform admins: undo exactly the steps that ran (a node whose config was asked
        for goes back through every step; one only cordoned is uncordoned, no pod evicted;
        a drain's node returns to service), then the quotas the change moved. It acts at
        once: the call is its own confirmation (the pages ask first)."""
        return self._decide(request, pk, "rollback")

    @extend_schema(
        request=None, responses={200: MigChangeSerializer}, parameters=[IF_MATCH, IDEMPOTENCY_KEY]
    )
    @action(detail=True, methods=["post"])
    def abort(self, request: Request, pk: str) -> Response:
        """Platform admins: stop a running change or rollback at its next step boundary. It
        acts at once: the call is its own confirmation (the pages ask first)."""
        return self._decide(request, pk, "abort")


class QuotaRequestSerializer(serializers.ModelSerializer[QuotaChangeRequest]):
    team: serializers.SlugRelatedField[Any] = serializers.SlugRelatedField(
        slug_field="slug", read_only=True
    )
    cluster: serializers.SlugRelatedField[Any] = serializers.SlugRelatedField(
        slug_field="name",
        read_only=True,
        help_text="The cluster of the namespace or ClusterQueue.",
    )
    # Null for the other kind (a namespace quota has no ClusterQueue and the other way
    # round) and for a request no automatic rule approved.
    namespace: serializers.SlugRelatedField[Any] = serializers.SlugRelatedField(
        slug_field="name", read_only=True, allow_null=True
    )
    cluster_queue: serializers.SlugRelatedField[Any] = serializers.SlugRelatedField(
        slug_field="name", read_only=True, allow_null=True
    )
    auto_rule: serializers.SlugRelatedField[Any] = serializers.SlugRelatedField(
        slug_field="name", read_only=True, allow_null=True
    )
    namespace_name = serializers.CharField(
        source="namespace_label",
        read_only=True,
        help_text="The namespace's name, also once it is deleted (then namespace is null).",
    )
    cluster_queue_name = serializers.CharField(
        source="cluster_queue_label",
        read_only=True,
        help_text="The ClusterQueue's name, also once it is deleted (then cluster_queue is null).",
    )
    target_deleted = serializers.BooleanField(
        read_only=True,
        help_text="Its namespace or ClusterQueue was deleted: it can no longer be applied.",
    )
    auto_rule_name = serializers.CharField(
        source="rule_name", read_only=True, help_text="Also once the rule is deleted."
    )
    requested_by = serializers.CharField(
        source="requested_by.get_username",
        read_only=True,
        default=None,
        allow_null=True,
        help_text="Who asked (null once that user is deleted): they may not decide it.",
    )

    class Meta:
        model = QuotaChangeRequest
        fields = [
            "id",
            "cluster",
            "team",
            "kind",
            "namespace",
            "namespace_name",
            "cluster_queue",
            "cluster_queue_name",
            "target_deleted",
            "flavor",
            "resource",
            "previous",
            "requested",
            "reason",
            "requested_by",
            "grant_until",
            "state",
            "assessment",
            "override_reason",
            "auto_rule",
            "auto_rule_name",
            "decision_comment",
            "decided_at",
            "end_note",
            "end_held",
            "created_at",
        ]


class QuotaRequestCreateSerializer(StrictInput, serializers.Serializer[Any]):
    cluster = serializers.CharField(
        required=False, allow_blank=True, default="", max_length=63, help_text=CLUSTER_HELP
    )
    team = serializers.SlugField()
    kind = serializers.ChoiceField(choices=QuotaChangeRequest.Kind.choices)
    namespace = serializers.CharField(required=False, allow_blank=True, default="")
    cluster_queue = serializers.CharField(required=False, allow_blank=True, default="")
    flavor = serializers.CharField(required=False, allow_blank=True, default="")
    resource = serializers.CharField(max_length=253)
    requested = serializers.CharField(max_length=64)
    reason = serializers.CharField(allow_blank=True)
    grant_until = serializers.DateTimeField(required=False, allow_null=True)
    override_reason = serializers.CharField(
        required=False,
        allow_blank=True,
        default="",
        help_text="Platform admins: why a quota should promise more than the fleet could "
        "ever offer (refused without it).",
    )


class QuotaDecisionSerializer(StrictInput, serializers.Serializer[Any]):
    comment = serializers.CharField(allow_blank=True, required=False, default="")
    fingerprint = serializers.CharField(
        required=False,
        allow_blank=True,
        default="",
        max_length=64,
        help_text="The assessment's fingerprint you decided on (default: the stored one). "
        "When the assessment changed since, the approval is refused (409 stale_assessment) "
        "and the new assessment stored.",
    )


class QuotaRequestViewSet(
    mixins.CreateModelMixin, viewsets.ReadOnlyModelViewSet[QuotaChangeRequest]
):
    serializer_class = QuotaRequestSerializer
    lookup_value_regex = r"\d+"  # an id that is no number is a 404, not a 500
    filterset_class = QuotaRequestFilter

    def get_queryset(self) -> Any:
        return selectors.list_quota_requests_for_user(self.request.user)

    @extend_schema(
        request=QuotaRequestCreateSerializer,
        responses={201: QuotaRequestSerializer},
        parameters=[IDEMPOTENCY_KEY],
    )
    @idempotent
    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        data = QuotaRequestCreateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        values = data.validated_data
        team = team_to_ask_for(request.user, values["team"], "quota")
        cluster = cluster_named(values["cluster"], request.user)
        created = quota.request_quota_change(
            actor=request.user,
            team=team,
            kind=values["kind"],
            resource=values["resource"],
            requested=values["requested"],
            reason=values["reason"],
            namespace=_one_named(
                Namespace.objects,
                values["namespace"],
                cluster,
                field="namespace",
                mine={"team": team},
            ),
            cluster_queue=_one_named(
                ClusterQueue.objects,
                values["cluster_queue"],
                cluster,
                field="ClusterQueue",
                mine={"local_queues__namespace__team": team},
            ),
            flavor=values["flavor"],
            grant_until=values.get("grant_until"),
            override_reason=values["override_reason"],
            source="api",
        )
        created.refresh_from_db()
        return Response(QuotaRequestSerializer(created).data, status=status.HTTP_201_CREATED)

    def retrieve(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        instance = self.get_object()
        response = Response(self.get_serializer(instance).data)
        response["ETag"] = quota_request_etag(instance)
        return response

    @idempotent
    def _decide(self, request: Request, pk: str, verb: str) -> Response:
        current = selectors.get_quota_request_for_user(request.user, int(pk))
        refused = check_if_match(request, quota_request_etag(current))
        if refused is not None:
            return refused
        data = QuotaDecisionSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        decide("quota", verb, _asked(request, pk, data.validated_data))
        decided = selectors.get_quota_request_for_user(request.user, int(pk))
        response = Response(QuotaRequestSerializer(decided).data)
        response["ETag"] = quota_request_etag(decided)
        return response

    @extend_schema(
        request=QuotaDecisionSerializer,
        responses={200: QuotaRequestSerializer},
        parameters=[IF_MATCH, IDEMPOTENCY_KEY],
    )
    @action(detail=True, methods=["post"])
    def approve(self, request: Request, pk: str) -> Response:
        return self._decide(request, pk, "approve")

    @extend_schema(
        request=QuotaDecisionSerializer,
        responses={200: QuotaRequestSerializer},
        parameters=[IF_MATCH, IDEMPOTENCY_KEY],
    )
    @action(detail=True, methods=["post"])
    def reject(self, request: Request, pk: str) -> Response:
        return self._decide(request, pk, "reject")

    @extend_schema(
        request=None,
        responses={200: QuotaRequestSerializer},
        parameters=[IF_MATCH, IDEMPOTENCY_KEY],
    )
    @action(detail=True, methods=["post"])
    def cancel(self, request: Request, pk: str) -> Response:
        """The requester (or a platform admin) withdraws a pending request."""
        return self._decide(request, pk, "cancel")


def _asked(request: Request, pk: str, values: dict[str, Any]) -> Asked:
    """A decision as the API asks it (its body read by the decision serializer)."""
    return Asked(
        request_id=int(pk),
        user=request.user,
        comment=values["comment"],
        seen=values["fingerprint"],
        source="api",
    )


def mig_change_etag(change: MigChangeRequest) -> str:
    return etag_of(
        change.pk,
        change.state,
        change.updated_at.isoformat(),
        change.impact.fingerprint,
    )


def quota_request_etag(qr: QuotaChangeRequest) -> str:
    return etag_of(
        qr.pk, qr.state, qr.decided_at, qr.grant_until, qr.previous, shown_fingerprint(qr)
    )


# ------------------------------------------------------------------------ the MIG policy


class MigGrantSerializer(StrictInput, serializers.Serializer[Any]):
    namespace = serializers.CharField(max_length=63)
    profile = serializers.CharField(max_length=32, help_text="A MIG profile, e.g. 3g.40gb.")
    devices = serializers.IntegerField(
        min_value=0, max_value=100_000, help_text="MIG devices of the profile held at once."
    )


class MigPolicySerializer(serializers.Serializer[Any]):
    cluster = serializers.CharField(source="cluster.name")
    governed = serializers.BooleanField()
    mode = serializers.CharField()
    profiles = serializers.ListField(child=serializers.CharField())
    grants = MigGrantSerializer(many=True, help_text="Only your teams' unless you see all.")
    pending_change = serializers.IntegerField(
        source="pending.pk", allow_null=True, default=None, help_text="Admins and approvers."
    )


class MigPolicyChangeSerializer(serializers.ModelSerializer[MigPolicyChange]):
    cluster = serializers.CharField(source="cluster.name", read_only=True)
    requested_by = serializers.CharField(source="requested_by.username", read_only=True)
    decided_by = serializers.CharField(
        source="decided_by.username", read_only=True, allow_null=True, default=None
    )
    grants = MigGrantSerializer(many=True)
    fingerprint = serializers.SerializerMethodField()

    class Meta:
        model = MigPolicyChange
        fields = [
            "id",
            "cluster",
            "requested_by",
            "created_at",
            "governed",
            "grants",
            "previous",
            "reason",
            "state",
            "assessment",
            "fingerprint",
            "decided_by",
            "decided_at",
            "decision_comment",
        ]
        read_only_fields = fields

    def get_fingerprint(self, obj: MigPolicyChange) -> str:
        return str(obj.assessment.get("fingerprint", ""))


class MigPolicyChangeCreateSerializer(StrictInput, serializers.Serializer[Any]):
    cluster = serializers.CharField(max_length=63, help_text="The cluster's name.")
    governed = serializers.BooleanField()
    grants = serializers.ListField(
        child=MigGrantSerializer(), max_length=2000, help_text="The whole policy's grants."
    )
    reason = serializers.CharField(allow_blank=True, max_length=2000)


class MigPolicyViewSet(viewsets.GenericViewSet[Any]):
    """Each cluster's MIG policy for MIG devices carved per claim (DRA): governed or not,
    and the grants of the namespaces you may see."""

    serializer_class = MigPolicySerializer
    queryset = Cluster.objects.none()  # one row per cluster (the schema's model); see list

    @extend_schema(responses={200: MigPolicySerializer(many=True)})
    def list(self, request: Request) -> Response:
        rows = mig_policy.mig_policies_for_user(request.user)
        page = self.paginate_queryset(rows)  # type: ignore[arg-type]
        data = MigPolicySerializer(page if page is not None else rows, many=True).data
        return self.get_paginated_response(data) if page is not None else Response(data)


class MigPolicyChangeViewSet(
    mixins.CreateModelMixin, viewsets.ReadOnlyModelViewSet[MigPolicyChange]
):
    """Proposed changes of a cluster's MIG policy (platform admins propose, approvers
    decide on a fresh assessment); readable by platform admins and approvers."""

    serializer_class = MigPolicyChangeSerializer
    lookup_value_regex = r"\d+"

    def get_queryset(self) -> Any:
        return mig_policy.list_mig_policy_changes_for_user(self.request.user)

    @extend_schema(
        request=MigPolicyChangeCreateSerializer,
        responses={201: MigPolicyChangeSerializer},
        parameters=[IDEMPOTENCY_KEY],
    )
    @idempotent
    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        mig_policy.require_policy_admin(request.user)
        data = MigPolicyChangeCreateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        values = data.validated_data
        cluster = cluster_named(values["cluster"], request.user)
        assert cluster is not None  # a required, non-blank name
        created = mig_policy.propose_mig_policy(
            actor=request.user,
            cluster=cluster,
            governed=values["governed"],
            grants=[dict(g) for g in values["grants"]],
            reason=values["reason"],
            source="api",
        )
        return Response(MigPolicyChangeSerializer(created).data, status=status.HTTP_201_CREATED)

    @extend_schema(
        request=DecisionSerializer,
        responses={200: MigPolicyChangeSerializer},
        parameters=[IDEMPOTENCY_KEY],
    )
    @action(detail=True, methods=["post"])
    @idempotent
    def approve(self, request: Request, pk: str) -> Response:
        return self._decide(request, pk, "approve")

    @extend_schema(
        request=DecisionSerializer,
        responses={200: MigPolicyChangeSerializer},
        parameters=[IDEMPOTENCY_KEY],
    )
    @action(detail=True, methods=["post"])
    @idempotent
    def reject(self, request: Request, pk: str) -> Response:
        return self._decide(request, pk, "reject")

    def _decide(self, request: Request, pk: str, verb: str) -> Response:
        """Approve or reject through the decisions' one table, as the page does."""
        data = DecisionSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        decide("policy", verb, _asked(request, pk, data.validated_data))
        decided = mig_policy.get_mig_policy_change_for_user(request.user, int(pk))
        return Response(MigPolicyChangeSerializer(decided).data)
