"""REST API of the cluster loop: GPU nodes as the last poll saw them (and the MIG configs
each can take), the last poll and what was not applied, and every desired object rendered."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import PermissionDenied
from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, viewsets
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from cluster.api_scope import (
    CLUSTER_QUERY,
    ClusterQuery,
    ClusterScoped,
    cluster_field,
    known_cluster_names,
)
from cluster.filters import NodeFilter
from cluster.models import Cluster, ObservedNode
from cluster.scope import settings_cluster
from cluster.selectors import (
    ApiStatus,
    api_status,
    apply_problems,
    apply_warnings,
    cluster_statuses,
    discovery_age,
    list_clusters_for_user,
    notices_for,
)
from fleet.models import MigConfig
from gpus.catalog import model_for_product, valid_configs
from loop.desired import collect_manifests, to_yaml_stream
from portal.access.permissions import is_platform_admin
from portal.access.selectors import pod_names_for
from portal.api.filters import no_such_team
from portal.api.safety import StrictQuery
from portal.api.schema import CLUSTER_NAME
from tenants.selectors import list_teams_for_user


class NodeSerializer(serializers.ModelSerializer[ObservedNode]):
    cluster = cluster_field()

    class Meta:
        model = ObservedNode
        fields = [
            "name",
            "cluster",
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


class NodeViewSet(ClusterScoped, viewsets.ReadOnlyModelViewSet[ObservedNode]):
    """GPU nodes as the last poll of their cluster saw them (observed state, read-only)."""

    serializer_class = NodeSerializer
    lookup_field = "name"
    lookup_value_regex = "[^/]+"
    filterset_class = NodeFilter
    ordering_fields = ["name", "last_changed"]
    kind = "node"

    def get_queryset(self) -> Any:
        # Only the columns shown: labels and the poller's bookkeeping stay in the database.
        return (
            ObservedNode.objects.on_every_cluster()
            .filter(gone_since__isnull=True)
            .select_related("cluster")
            .only(*NodeSerializer.Meta.fields, "cluster__name")
            .order_by("name", "cluster__name")
        )


class ClusterSerializer(serializers.ModelSerializer[Cluster]):
    """A cluster without its credential: only whether one is stored, and since when."""

    purpose_meaning = serializers.CharField(read_only=True)
    has_credential = serializers.BooleanField(read_only=True)
    discovery = serializers.SerializerMethodField()

    class Meta:
        model = Cluster
        fields = [
            "name",
            "display_name",
            "purpose",
            "purpose_meaning",
            "connection",
            "api_url",
            "kubeconfig_context",
            "verify_tls",
            "has_credential",
            "credential_set_at",
            "kubernetes_version",
            "kueue_versions",
            "volcano",
            "gpu_operator",
            "gpu_operator_detail",
            "mig_strategy",
            "discovered_at",
            "discovery_error",
            "discovery",
        ]

    def get_discovery(self, cluster: Cluster) -> str:
        """fresh, stale (older than three polls) or never."""
        return discovery_age(cluster)


class ClusterViewSet(viewsets.ReadOnlyModelViewSet[Cluster]):
    """The clusters the portal serves and what each poll discovered there (platform admins;
    credentials are never shown)."""

    serializer_class = ClusterSerializer
    queryset = Cluster.objects.none()  # for the schema; get_queryset checks the user
    lookup_field = "name"
    lookup_value_regex = "[a-z0-9-]+"

    def get_queryset(self) -> Any:
        if getattr(self, "swagger_fake_view", False):
            return Cluster.objects.none()
        return list_clusters_for_user(self.request.user)


class MigConfigsViewSet(ClusterScoped, viewsets.ViewSet):
    """MIG configs a node's GPU model can take (standard and custom)."""

    kind = "node"

    @extend_schema(parameters=[OpenApiParameter("node", str, required=True)], responses={200: dict})
    def list(self, request: Request) -> Response:
        name = request.query_params.get("node", "")
        node = self.one_named(
            ObservedNode.objects.on_every_cluster().filter(gone_since__isnull=True), name
        )
        model = model_for_product(node.gpu_product) if node.gpu_product else None
        custom = {c.name: (c.gpu_model, c.devices) for c in MigConfig.objects.all()}
        configs = valid_configs(node=name, model=model, gpu_count=node.gpu_count, custom=custom)
        return Response({"node": name, "model": model, "configs": configs})


class ApiStateSerializer(serializers.Serializer[Any]):
    state = serializers.ChoiceField(
        choices=["ok", "unreachable", "stale", "never"],
        help_text="ok, unreachable (since the first poll that got no answer), stale (nobody "
        "polls) or never (not polled yet).",
    )
    since = serializers.DateTimeField(allow_null=True)
    last_ok = serializers.DateTimeField(allow_null=True)
    message = serializers.CharField()


class LastSyncSerializer(serializers.Serializer[Any]):
    started_at = serializers.DateTimeField()
    duration_ms = serializers.IntegerField(allow_null=True)
    nodes = serializers.IntegerField()
    pods = serializers.IntegerField()
    ok = serializers.BooleanField()
    running = serializers.BooleanField(
        help_text="The poll is still under way (neither ok nor failed yet)."
    )
    error = serializers.CharField(allow_blank=True)


class ClusterSyncSerializer(serializers.Serializer[Any]):
    cluster = cluster_field(None)
    api = ApiStateSerializer()
    last_sync = LastSyncSerializer(allow_null=True)


class NotAppliedSerializer(serializers.Serializer[Any]):
    cluster = cluster_field(None)
    kind = serializers.CharField()
    namespace = serializers.CharField(allow_blank=True)
    name = serializers.CharField()
    outcome = serializers.CharField()
    message = serializers.CharField(allow_blank=True)


class ApplyWarningSerializer(serializers.Serializer[Any]):
    cluster = cluster_field(None)
    kind = serializers.CharField()
    namespace = serializers.CharField(allow_blank=True)
    name = serializers.CharField()
    warnings = serializers.ListField(child=serializers.CharField())


class SyncStatusSerializer(ClusterSyncSerializer):
    cluster = serializers.CharField(
        help_text="The cluster `api` and `last_sync` are of: the path's, the one asked for, "
        "else the one the settings connect to (`clusters` has every one)."
    )
    clusters = ClusterSyncSerializer(many=True, help_text="Each cluster's last poll, by name.")
    not_applied = NotAppliedSerializer(
        many=True,
        help_text="Objects not applied: cluster-wide ones, and those in your teams' "
        "namespaces (platform admins and approvers: every one).",
    )
    not_applied_elsewhere = serializers.IntegerField(
        help_text="How many objects of other teams' namespaces were not applied (not named)."
    )
    warnings = ApplyWarningSerializer(many=True)
    warnings_elsewhere = serializers.IntegerField(
        help_text="How many objects of other teams' namespaces drew warnings (not named)."
    )


class SyncStatusView(ClusterScoped, APIView):
    """The last poll of each cluster and the objects not applied there (or the warnings
    their last apply drew), each naming its cluster."""

    @extend_schema(parameters=[CLUSTER_QUERY], responses={200: SyncStatusSerializer})
    def get(self, request: Request) -> Response:
        query = ClusterQuery(data=request.query_params, context={"user": request.user})
        query.is_valid(raise_exception=True)
        cluster = self.asked_cluster(query)
        polls: list[tuple[Cluster | None, ApiStatus]]
        if cluster is None:
            polls = [(s.cluster, s.api) for s in cluster_statuses()]
            problems, warnings = apply_problems(), apply_warnings()
        else:
            polls = [(cluster, api_status(cluster))]
            problems = apply_problems().filter(cluster=cluster)
            warnings = apply_warnings().filter(cluster=cluster)
        settings_one = (p for p in polls if p[0] and p[0].connection == Cluster.Connection.SETTINGS)
        shown = next(settings_one, polls[0] if polls else (None, api_status(settings_cluster())))
        admin = is_platform_admin(request.user)
        known: set[str] | None = None
        if not admin:  # the clusters they may know of, without addresses or raw errors
            known = set(known_cluster_names(request.user))
            polls = [p for p in polls if p[0] is not None and p[0].name in known]
        names = pod_names_for(request.user)
        problems_shown, others_problems = notices_for(names, _notices(problems))
        warnings_shown, others_warned = notices_for(names, _notices(warnings))
        return Response(
            {
                **_poll(*shown, admin=admin, known=known),
                "clusters": [_poll(*poll, admin=admin) for poll in polls],
                "not_applied": [
                    {
                        "cluster": p.cluster.name,
                        "kind": p.kind,
                        "namespace": p.namespace,
                        "name": p.name,
                        "outcome": p.outcome,
                        "message": p.message,
                    }
                    for p in problems_shown
                ],
                "not_applied_elsewhere": others_problems,
                "warnings": [
                    {
                        "cluster": w.cluster.name,
                        "kind": w.kind,
                        "namespace": w.namespace,
                        "name": w.name,
                        "warnings": w.warnings,
                    }
                    for w in warnings_shown
                ],
                "warnings_elsewhere": others_warned,
            }
        )


NOTICE = ("kind", "namespace", "name", "outcome", "message", "warnings")


def _notices(rows: Any) -> list[Any]:
    return list(rows.select_related("cluster").only("cluster", "cluster__name", *NOTICE))


# What anyone but a platform admin reads of a poll that failed: the errors name the API
# server's address and say what answered there.
WITHHELD = "not reachable (platform admins see why)"


def _poll(
    cluster: Cluster | None,
    api: ApiStatus,
    *,
    admin: bool = True,
    known: set[str] | None = None,
) -> dict[str, Any]:
    """A cluster's name, what its polls tell of its API, and its newest poll (for anyone but
    a platform admin without the error texts, and the name only where ``known``)."""
    run = api.latest
    name = "" if cluster is None else cluster.name
    if known is not None and name not in known:
        name = ""
    return {
        "cluster": name,
        "api": {
            "state": api.state,
            "since": api.since,
            "last_ok": api.last_ok,
            "message": api.message if admin or api.state == "ok" else WITHHELD,
        },
        "last_sync": None
        if run is None
        else {
            "started_at": run.started_at,
            "duration_ms": run.duration_ms,
            "nodes": run.nodes,
            "pods": run.pods,
            "ok": run.ok,
            "running": run.running,
            "error": run.error if admin or not run.error else WITHHELD,
        },
    }


class ManifestsQuery(StrictQuery):
    """``?team=`` one of yours (any other slug, of a team or of none, is refused the same
    way) and ``?format=`` json or yaml."""

    team = serializers.SlugField(required=False, max_length=63)
    cluster = serializers.CharField(required=False, max_length=63)
    format = serializers.ChoiceField(choices=["json", "yaml"], required=False, default="json")

    def validate_team(self, value: str) -> str:
        slugs = list(self.context["teams"].values_list("slug", flat=True))
        if value not in slugs:
            raise serializers.ValidationError(no_such_team(slugs))
        return value


class ManifestsView(ClusterScoped, APIView):
    """Everything the portal manages on one cluster, rendered (``?format=yaml`` for a YAML
    stream, as ``kubectl apply -f -`` takes it)."""

    @extend_schema(
        parameters=[
            OpenApiParameter(
                "team",
                {"type": "string", "minLength": 1, "maxLength": 63},
                description="Only this team's objects: one of your teams (another slug, of a "
                "team or of none, is a 400 naming `team`). Needed unless you are a platform "
                "admin.",
            ),
            OpenApiParameter(
                "cluster",
                {"type": "string", "pattern": CLUSTER_NAME, "maxLength": 63},
                description="The cluster whose objects are rendered: needed when there are "
                "several (a name no cluster has is a 400 naming `cluster`).",
            ),
            OpenApiParameter("format", str, enum=["json", "yaml"]),
        ],
        # The YAML form is a stream of documents (``---``), served as text for
        # ``kubectl apply -f -``.
        responses={(200, "application/json"): dict, (200, "text/plain"): OpenApiTypes.STR},
    )
    def get(self, request: Request) -> Response | HttpResponse:
        teams = list_teams_for_user(request.user).prefetch_related(None).order_by("slug")
        query = ManifestsQuery(data=request.query_params, context={"teams": teams})
        query.is_valid(raise_exception=True)
        team = query.validated_data.get("team")
        if team is None and not is_platform_admin(request.user):
            raise PermissionDenied("Only platform admins export every object; pass ?team=<slug>.")
        cluster = self.chosen_cluster(query.validated_data.get("cluster"))
        manifests = collect_manifests(team_slug=team, cluster=cluster)
        if query.validated_data["format"] == "yaml":
            return HttpResponse(to_yaml_stream(manifests), content_type="text/plain; charset=utf-8")
        return Response({"items": manifests})
