"""REST API of queues: read by everyone signed in; platform admins replace a ClusterQueue's
quotas (``PUT …/quotas/``, optionally as a dry run that returns the rendered YAML diff)."""

from __future__ import annotations

import copy
from dataclasses import asdict
from typing import Any

from django.core.exceptions import PermissionDenied, ValidationError
from drf_spectacular.utils import PolymorphicProxySerializer, extend_schema
from rest_framework import serializers, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from cluster.api_scope import ClusterScoped, cluster_field, keep_cluster, unchanged_cluster
from portal.access.permissions import is_platform_admin, sees_every_team, user_id
from portal.api.safety import IF_MATCH, StrictInput, etag_of, guarded_write
from portal.vocabulary.errors import DomainError
from portal.vocabulary.quantity import QuantityError, parse_quantity
from queues import preview
from queues.dra import quota_notes as kueue_quota_notes
from queues.filters import (
    ClusterQueueFilter,
    CohortFilter,
    LocalQueueFilter,
    ResourceFlavorFilter,
)
from queues.models import ClusterQueue, Cohort, LocalQueue, ResourceFlavor, StopPolicy
from queues.rules import quota_entries
from queues.selectors import cluster_queue_what_if, namespace_quota_what_if, simulates_kueue
from queues.services import promise_errors, promises_of, respelled, save_cluster_queue
from tenants.models import Namespace
from tenants.selectors import list_teams_for_user


class ResourceFlavorSerializer(serializers.ModelSerializer[ResourceFlavor]):
    cluster = cluster_field()

    class Meta:
        model = ResourceFlavor
        fields = [
            "name",
            "cluster",
            "node_labels",
            "node_taints",
            "tolerations",
            "topology_name",
            "description",
        ]


class ResourceFlavorViewSet(ClusterScoped, viewsets.ReadOnlyModelViewSet[ResourceFlavor]):
    """ResourceFlavors, each on its cluster."""

    serializer_class = ResourceFlavorSerializer
    queryset = ResourceFlavor.objects.select_related("cluster")
    lookup_field = "name"
    filterset_class = ResourceFlavorFilter
    kind = "ResourceFlavor"


class ClusterQueueSerializer(serializers.ModelSerializer[ClusterQueue]):
    cohort: serializers.SlugRelatedField[Any] = serializers.SlugRelatedField(
        slug_field="name", read_only=True, allow_null=True
    )
    cluster = cluster_field()

    class Meta:
        model = ClusterQueue
        fields = [
            "name",
            "cluster",
            "cohort",
            "fair_sharing_weight",
            "queueing_strategy",
            "namespace_selector",
            "preemption_within_cluster_queue",
            "preemption_reclaim_within_cohort",
            "preemption_borrow_within_cohort",
            "stop_policy",
            "resource_groups",
            "description",
        ]


def cluster_queue_etag(cq: ClusterQueue) -> str:
    return etag_of(cq.pk, cq.fair_sharing_weight, cq.stop_policy, cq.resource_groups)


class QuotasWriteSerializer(StrictInput, serializers.Serializer[Any]):
    cluster = unchanged_cluster("ClusterQueue")
    resource_groups = serializers.ListField(
        child=serializers.DictField(),
        help_text="Kueue's resourceGroups: coveredResources, and flavors with their resources "
        "(name, nominalQuota, borrowingLimit, lendingLimit).",
    )
    fair_sharing_weight = serializers.CharField(required=False, allow_blank=True, max_length=32)
    stop_policy = serializers.ChoiceField(choices=StopPolicy.choices, required=False)
    dry_run = serializers.BooleanField(
        required=False, default=False, help_text="Validate and show the diff; save nothing."
    )
    promise_more_than_exists = serializers.BooleanField(
        required=False,
        default=False,
        help_text="Save a raise that leaves the queues promising more than the nodes behind "
        "a flavor offer (refused without it).",
    )
    override_reason = serializers.CharField(
        required=False,
        allow_blank=True,
        default="",
        help_text="Why a quota is raised above what the fleet could ever offer, in any MIG "
        "layout (refused without it); recorded in the audit.",
    )


class WhatIfAdmittedSerializer(serializers.Serializer[Any]):
    order = serializers.IntegerField(help_text="1 for the first Kueue would admit.")
    workload = serializers.CharField(help_text="namespace/name, or another team's workload.")
    cluster_queue = serializers.CharField()
    flavors = serializers.DictField(
        child=serializers.CharField(), help_text="resource -> the flavor it gets"
    )
    borrows = serializers.BooleanField(help_text="It uses more than its queue's nominal quota.")
    preempts = serializers.ListField(child=serializers.CharField())


class WhatIfPreemptedSerializer(serializers.Serializer[Any]):
    workload = serializers.CharField()
    cluster_queue = serializers.CharField()
    by = serializers.CharField(help_text="The workload admitted in its place.")
    reason = serializers.CharField(
        help_text="Kueue's Preempted reason: InClusterQueue, InCohortReclamation, "
        "InCohortReclaimWhileBorrowing or InCohortFairSharing."
    )
    policy = serializers.CharField(help_text="The setting that allows it.")


class WhatIfWaitingSerializer(serializers.Serializer[Any]):
    workload = serializers.CharField()
    cluster_queue = serializers.CharField()
    why = serializers.CharField()


class WhatIfBorrowingSerializer(serializers.Serializer[Any]):
    cluster_queue = serializers.CharField()
    cohort = serializers.CharField()
    flavor = serializers.CharField()
    resource = serializers.CharField()
    borrowed_before = serializers.CharField()
    borrowed_after = serializers.CharField()
    may_borrow_before = serializers.CharField()
    may_borrow_after = serializers.CharField()
    loses = serializers.CharField(help_text="How much less it may borrow after the change.")


class WhatIfSerializer(serializers.Serializer[Any]):
    """What Kueue would do with a ClusterQueue quota change, simulated on the last poll's
    workloads (Kueue's documented admission and preemption; ``not_modelled`` says what the
    simulation leaves out)."""

    known = serializers.BooleanField(help_text="False until the cluster was observed.")
    admitted = WhatIfAdmittedSerializer(many=True)
    preempted = WhatIfPreemptedSerializer(many=True)
    waiting = WhatIfWaitingSerializer(many=True)
    borrowing = WhatIfBorrowingSerializer(many=True)
    fair_sharing = serializers.BooleanField()
    scope = serializers.ListField(
        child=serializers.CharField(),
        help_text="The cohorts (and ClusterQueues in no cohort) the change reaches, whose "
        "workloads were simulated: queues of other cohorts share no quota with it. Empty: "
        "every queue.",
    )
    gave_up = serializers.CharField(
        help_text="Why nothing was simulated (more workloads where the change reaches than "
        "the simulation takes on); empty when it was.",
    )
    not_modelled = serializers.ListField(child=serializers.CharField())


class QuotasDryRunSerializer(serializers.Serializer[Any]):
    """What ``dry_run: true`` answers instead of the queue: the change, nothing saved."""

    dry_run = serializers.BooleanField()
    diff = serializers.CharField(help_text="The rendered ClusterQueue's YAML diff.")
    manifest = serializers.DictField(help_text="The ClusterQueue as it would be sent.")
    promises = serializers.ListField(
        child=serializers.DictField(),
        help_text="Per flavor and resource, what the queues would promise against the nodes.",
    )
    refused = serializers.ListField(
        child=serializers.CharField(), help_text="Why saving it would be refused (empty: not)."
    )
    what_if = WhatIfSerializer(allow_null=True, help_text="Null with Volcano queues.")
    kueue_notes = serializers.DictField(
        child=serializers.CharField(),
        help_text="Resource -> why the cluster's Kueue would count nothing in its quota (a "
        "DRA resource its deviceClassMappings do not map, a DeviceClass named as a resource).",
    )


class ClusterQueueViewSet(ClusterScoped, viewsets.ReadOnlyModelViewSet[ClusterQueue]):
    """ClusterQueues with their quotas, each on its cluster. Platform admins replace the quotas with
    ``PUT …/quotas/`` (``If-Match`` with the queue's ``ETag``: 412 when someone changed it
    since; ``dry_run: true`` answers with the rendered YAML diff and saves nothing)."""

    serializer_class = ClusterQueueSerializer
    lookup_field = "name"
    filterset_class = ClusterQueueFilter
    kind = "ClusterQueue"

    def get_queryset(self) -> Any:
        return ClusterQueue.objects.select_related("cohort", "cluster")

    def retrieve(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        cq = self.get_object()
        response = Response(self.get_serializer(cq).data)
        response["ETag"] = cluster_queue_etag(cq)
        return response

    @extend_schema(
        request=QuotasWriteSerializer,
        responses={
            200: PolymorphicProxySerializer(
                component_name="QuotasResult",
                serializers=[ClusterQueueSerializer, QuotasDryRunSerializer],
                resource_type_field_name=None,
            )
        },
        parameters=[IF_MATCH],
    )
    @action(detail=True, methods=["put"])
    def quotas(self, request: Request, name: str) -> Response:
        """Replace the queue's resource groups (and weight, stop policy): the same rules as
        the admin and the Queues page, field errors on ``resource_groups``."""
        if not is_platform_admin(request.user):
            raise PermissionDenied("Only platform admins change ClusterQueues.")
        data = QuotasWriteSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        with guarded_write(
            request, ClusterQueue.objects.all(), self.get_object().pk, cluster_queue_etag
        ) as (cq, refused):
            if refused is not None:
                return refused
            keep_cluster(cq, "ClusterQueue", data.validated_data, cq.cluster.name)
            return self._replace_quotas(request, cq, data.validated_data)

    def _replace_quotas(
        self, request: Request, cq: ClusterQueue, values: dict[str, Any]
    ) -> Response:
        """The edit itself, under the queue's row lock (a dry run answers the diff)."""
        edited = copy.deepcopy(cq)
        edited.resource_groups = respelled(values["resource_groups"])
        if "fair_sharing_weight" in values:
            edited.fair_sharing_weight = values["fair_sharing_weight"]
        if "stop_policy" in values:
            edited.stop_policy = values["stop_policy"]
        edited.full_clean()
        if values["dry_run"]:
            shown = promises_of(cq, edited)
            refused = promise_errors(
                shown,
                override_reason=values["override_reason"],
                promise_more_than_exists=values["promise_more_than_exists"],
            )
            manifest = preview.cluster_queue_manifest(edited)
            lines = preview.yaml_diff(
                preview.as_yaml(preview.cluster_queue_manifest(cq)), preview.as_yaml(manifest)
            )
            return Response(
                {
                    "dry_run": True,
                    "diff": "\n".join(t if k == "@" else f"{k}{t}" for k, t in lines),
                    "manifest": manifest,
                    "promises": [
                        {"flavor": f, "resource": r, **asdict(p)} for (f, r), p in shown.items()
                    ],
                    "refused": [m for messages in refused.values() for m in messages],
                    "what_if": cluster_queue_what_if(request.user, edited)
                    if simulates_kueue()
                    else None,
                    "kueue_notes": kueue_quota_notes(
                        edited.cluster_id, {r for _, r in edited.quota()}
                    ),
                }
            )
        save_cluster_queue(  # a promise beyond the fleet: field errors of its own inputs
            actor=request.user,
            cluster_queue=edited,
            source="api",
            override_reason=values["override_reason"],
            promise_more_than_exists=values["promise_more_than_exists"],
        )
        fresh = self.get_queryset().get(pk=cq.pk)
        response = Response(ClusterQueueSerializer(fresh).data)
        response["ETag"] = cluster_queue_etag(fresh)
        return response


class LocalQueueSerializer(serializers.ModelSerializer[LocalQueue]):
    namespace: serializers.SlugRelatedField[Any] = serializers.SlugRelatedField(
        slug_field="name", read_only=True
    )
    cluster_queue: serializers.SlugRelatedField[Any] = serializers.SlugRelatedField(
        slug_field="name", read_only=True
    )
    cluster = cluster_field("namespace.cluster.name")

    class Meta:
        model = LocalQueue
        fields = [
            "id",
            "name",
            "cluster",
            "namespace",
            "cluster_queue",
            "stop_policy",
            "description",
        ]


class LocalQueueViewSet(ClusterScoped, viewsets.ReadOnlyModelViewSet[LocalQueue]):
    """LocalQueues of your teams' namespaces (a LocalQueue is on its namespace's cluster)."""

    serializer_class = LocalQueueSerializer
    filterset_class = LocalQueueFilter
    cluster_path = "namespace__cluster"
    kind = "LocalQueue"

    def get_queryset(self) -> Any:
        teams = list_teams_for_user(self.request.user)
        return LocalQueue.objects.filter(namespace__team__in=teams).select_related(
            "namespace__cluster", "cluster_queue"
        )


class CohortSerializer(serializers.ModelSerializer[Any]):
    parent: serializers.SlugRelatedField[Any] = serializers.SlugRelatedField(  # type: ignore[assignment]
        slug_field="name", read_only=True, allow_null=True
    )

    cluster = cluster_field()

    class Meta:
        model = Cohort
        fields = [
            "name",
            "cluster",
            "parent",
            "fair_sharing_weight",
            "resource_groups",
            "description",
        ]


class CohortViewSet(ClusterScoped, viewsets.ReadOnlyModelViewSet[Any]):
    """Cohorts, each on its cluster."""

    serializer_class = CohortSerializer
    lookup_field = "name"
    filterset_class = CohortFilter
    kind = "Cohort"

    def get_queryset(self) -> Any:
        return Cohort.objects.select_related("parent", "cluster")


class WhatIfRequestSerializer(StrictInput, serializers.Serializer[Any]):
    """A proposed quota: one ClusterQueue (flavor, resource) entry, or one namespace quota
    item."""

    cluster_queue = serializers.CharField(required=False, max_length=253)
    flavor = serializers.CharField(required=False, max_length=253)
    namespace = serializers.CharField(required=False, max_length=63)
    resource = serializers.CharField(max_length=253)
    nominal_quota = serializers.CharField(required=False, max_length=64)
    borrowing_limit = serializers.CharField(
        required=False, allow_blank=True, max_length=64, help_text='"" removes the limit.'
    )
    lending_limit = serializers.CharField(
        required=False, allow_blank=True, max_length=64, help_text='"" removes the limit.'
    )
    hard = serializers.CharField(
        required=False, max_length=64, help_text="The namespace quota item's new hard limit."
    )

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if ("cluster_queue" in attrs) == ("namespace" in attrs):
            raise serializers.ValidationError(
                {"cluster_queue": ["Name a ClusterQueue or a namespace (one of the two)."]}
            )
        if "namespace" in attrs:
            if "hard" not in attrs:
                raise serializers.ValidationError({"hard": ["This field is required."]})
            return attrs
        if "flavor" not in attrs:
            raise serializers.ValidationError({"flavor": ["This field is required."]})
        if not {"nominal_quota", "borrowing_limit", "lending_limit"} & set(attrs):
            raise serializers.ValidationError(
                {"nominal_quota": ["Give nominal_quota, borrowing_limit or lending_limit."]}
            )
        return attrs


class NamespaceWhatIfRowSerializer(serializers.Serializer[Any]):
    workload = serializers.CharField()
    amount = serializers.CharField()
    fits_before = serializers.BooleanField()
    fits_after = serializers.BooleanField()


class NamespaceWhatIfSerializer(serializers.Serializer[Any]):
    """A namespace quota change against the namespace's waiting workloads: Kueue does not
    look at ResourceQuota; it decides whether admitted workloads' pods are created."""

    known = serializers.BooleanField()
    resource = serializers.CharField()
    note = serializers.CharField()
    used = serializers.CharField(required=False)
    rows = NamespaceWhatIfRowSerializer(many=True)


def _edited_entry(cq: ClusterQueue, values: dict[str, Any]) -> ClusterQueue:
    """A copy of ``cq`` with one (flavor, resource) entry changed, checked like a save."""
    edited = copy.deepcopy(cq)
    groups = copy.deepcopy(cq.resource_groups or [])
    entry = next(
        (
            q
            for _, flavor, q in quota_entries(groups)
            if flavor == values["flavor"] and q["name"] == values["resource"]
        ),
        None,
    )
    if entry is None:
        raise ValidationError(
            {"flavor": [f"ClusterQueue {cq.name} has no quota of {values['resource']} there."]}
        )
    if "nominal_quota" in values:
        entry["nominalQuota"] = values["nominal_quota"]
    for name, field in (("borrowing_limit", "borrowingLimit"), ("lending_limit", "lendingLimit")):
        if values.get(name):
            entry[field] = values[name]
        elif name in values:
            entry.pop(field, None)
    edited.resource_groups = respelled(groups)
    edited.full_clean()
    return edited


class WhatIfView(ClusterScoped, APIView):
    """What a quota change would do before anyone asks for it: for a ClusterQueue entry,
    which waiting workloads Kueue would admit (in order, on which flavor), whom that
    preempts and what the cohort's members borrow before and after; for a namespace quota
    item, which waiting workloads' pods would fit. Nothing is saved. Another team's
    workloads are not named; a namespace of another team is a 404."""

    @extend_schema(
        request=WhatIfRequestSerializer,
        responses={
            200: PolymorphicProxySerializer(
                component_name="WhatIfResult",
                serializers=[WhatIfSerializer, NamespaceWhatIfSerializer],
                resource_type_field_name=None,
            )
        },
    )
    def post(self, request: Request) -> Response:
        data = WhatIfRequestSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        values = data.validated_data
        if "namespace" in values:
            visible = Namespace.objects.all()
            if not sees_every_team(request.user):
                visible = visible.filter(team__memberships__user_id=user_id(request.user))
            namespace = self.one_named(visible, values["namespace"], "namespace")
            try:
                parse_quantity(values["hard"])
            except QuantityError as exc:
                raise ValidationError({"hard": [str(exc)]}) from None
            return Response(namespace_quota_what_if(namespace, values["resource"], values["hard"]))
        cq = self.one_named(
            ClusterQueue.objects.select_related("cohort"), values["cluster_queue"], "ClusterQueue"
        )
        if not simulates_kueue():
            raise DomainError(
                "The what-if simulates Kueue; this portal's queues are Volcano's.",
                code="not_kueue",
            )
        return Response(cluster_queue_what_if(request.user, _edited_entry(cq, values)))
