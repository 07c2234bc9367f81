"""REST API of the Workloads pages: the list (``/api/v1/workloads/``, the page's filters) and
one workload (``/api/v1/clusters/<cluster>/workloads/<namespace>/<name>/``, or flat when
one cluster has it), in the pages' scope: another team's workload is a 404."""

from __future__ import annotations

from typing import Any

from django.core.paginator import Paginator
from django.utils import timezone
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, viewsets
from rest_framework.exceptions import NotFound
from rest_framework.request import Request
from rest_framework.response import Response

from cluster.api_scope import ClusterScoped, ambiguous, cluster_field
from cluster.models import ObservedWorkload
from cluster.scope import visible_clusters
from diagnostics.api import EstimateSerializer
from diagnostics.selectors import shown_for
from overview.filters import WorkloadFilter
from overview.workloads import (
    LISTED,
    STATES,
    event_moment,
    events_of,
    named,
    newest_first,
    page_of,
    pods_of,
    story,
    visible_workloads,
)
from portal.access.selectors import pod_names_for
from portal.api.pagination import PageNumberPagination
from portal.vocabulary.errors import DomainError
from usage.runs import gpu_hours


class WorkloadSerializer(serializers.ModelSerializer[ObservedWorkload]):
    cluster = cluster_field()
    team = serializers.CharField(
        read_only=True, allow_null=True, help_text="The slug of its namespace's team, if any."
    )
    state = serializers.ChoiceField(
        choices=STATES,
        read_only=True,
        help_text="waiting (in line), admitted, evicted (and not admitted again since) or "
        "finished.",
    )
    local_queue = serializers.CharField(source="queue_name", read_only=True)
    cluster_queue = serializers.CharField(
        source="queue",
        read_only=True,
        help_text="The ClusterQueue it is in: the one holding its quota, or, while it waits, "
        "the one its LocalQueue points at (empty when none does).",
    )
    requests = serializers.DictField(
        child=serializers.IntegerField(), read_only=True, help_text="What Kueue charges it."
    )
    flavors = serializers.DictField(
        child=serializers.CharField(),
        read_only=True,
        help_text="The flavor Kueue assigned each resource (admitted).",
    )

    class Meta:
        model = ObservedWorkload
        fields = [
            "cluster",
            "namespace",
            "name",
            "team",
            "state",
            "local_queue",
            "cluster_queue",
            "priority",
            "requests",
            "flavors",
            "created_at",
            "queued_at",
            "admitted_at",
            "finished_at",
            "evictions",
            "evicted_reason",
            "evicted_at",
            "requeue_at",
            "position",
            "position_in_local_queue",
        ]
        read_only_fields = fields


class MomentSerializer(serializers.Serializer[Any]):
    at = serializers.DateTimeField(allow_null=True)
    title = serializers.CharField(help_text="What happened, in words.")
    detail = serializers.CharField(allow_blank=True, help_text="Kueue's own message.")
    tone = serializers.CharField(allow_blank=True, help_text="ok, warn, bad or empty.")
    origin = serializers.ChoiceField(
        source="source",
        choices=[("condition", "condition"), ("event", "event"), ("portal", "portal")],
        help_text="Where the line comes from: one of Kueue's conditions (the latest of its "
        "type), one of Kueue's events the portal kept, or the Workload itself (its creation, "
        "its evictions counted, its back-off).",
    )
    count = serializers.IntegerField(
        help_text="An event's: how often Kueue said it (0 for a condition's line)."
    )
    last = serializers.DateTimeField(
        allow_null=True, help_text="An event's: when Kueue said it last (null otherwise)."
    )


class EventSerializer(serializers.Serializer[Any]):
    reason = serializers.CharField(source="title", help_text="Kueue's reason, in words.")
    message = serializers.CharField(
        source="detail",
        allow_blank=True,
        help_text="Kueue's message (a workload it names that you may not see is said as "
        "another team's).",
    )
    tone = serializers.CharField(allow_blank=True, help_text="ok, warn, bad or empty.")
    count = serializers.IntegerField(help_text="How often Kueue said it.")
    first_seen = serializers.DateTimeField(source="at")
    last_seen = serializers.DateTimeField(source="last")


class WhySerializer(serializers.Serializer[Any]):
    cause = serializers.CharField()
    next_step = serializers.CharField()
    evidence = serializers.ListField(child=serializers.CharField())


class WorkloadPodSerializer(serializers.Serializer[Any]):
    name = serializers.CharField()
    phase = serializers.CharField(allow_blank=True)
    node = serializers.CharField(source="node_name", allow_blank=True)
    gpu_requests = serializers.DictField(child=serializers.IntegerField())
    started_at = serializers.DateTimeField(allow_null=True)


class WorkloadDetailSerializer(WorkloadSerializer):
    conditions = serializers.ListField(
        child=serializers.DictField(child=serializers.CharField()),
        read_only=True,
        help_text="Kueue's conditions as the last poll saw them (one per type).",
    )
    story = MomentSerializer(many=True, read_only=True, help_text="Its story, oldest first.")
    events = EventSerializer(
        many=True,
        read_only=True,
        help_text="Kueue's events about it that the portal kept (a workload's newest 20, "
        "oldest first), also told in its story.",
    )
    why = WhySerializer(
        read_only=True, allow_null=True, help_text="Why it waits (null: nothing in its way)."
    )
    estimate = EstimateSerializer(
        read_only=True, allow_null=True, help_text="When it could start (null: admitted)."
    )
    pods = WorkloadPodSerializer(many=True, read_only=True)
    gpu_hours = serializers.FloatField(
        read_only=True,
        allow_null=True,
        help_text="GPU-hours since its latest admission (whole GPUs, a MIG slice as its "
        "share), from the usage records; null when none is recorded.",
    )

    class Meta(WorkloadSerializer.Meta):
        fields = [
            *WorkloadSerializer.Meta.fields,
            "conditions",
            "story",
            "events",
            "why",
            "estimate",
            "pods",
            "gpu_hours",
        ]
        read_only_fields = fields


class NamedPaginator(Paginator):  # type: ignore[type-arg]
    """A page of workloads whose names (team, ClusterQueue) are computed for its own rows
    only (``overview.workloads.page_of``), with the cluster's name beside each."""

    def page(self, number: Any) -> Any:
        page = super().page(number)
        rows = page_of(page.object_list)  # type: ignore[arg-type]
        page.object_list = rows.select_related("cluster").only(*LISTED, "cluster__name")
        return page


class WorkloadPagination(PageNumberPagination):
    django_paginator_class = NamedPaginator


class WorkloadViewSet(ClusterScoped, viewsets.ReadOnlyModelViewSet[ObservedWorkload]):
    """Kueue's workloads as the last poll of their cluster saw them: your teams' namespaces'
    (every team's for approvers and platform admins), the newest first, 50 a page; one
    workload with its story, why it waits, its pods and the GPU-hours it used. Another
    team's workload is a 404, as one that does not exist."""

    serializer_class = WorkloadSerializer
    filterset_class = WorkloadFilter
    pagination_class = WorkloadPagination
    ordering_fields = ["created_at", "priority", "namespace", "name"]
    kind = "workload"

    def get_queryset(self) -> Any:
        if getattr(self, "swagger_fake_view", False):
            return ObservedWorkload.objects.none()
        user = self.request.user
        return newest_first(visible_workloads(user, visible_clusters(user).values("pk")).only("pk"))

    def get_serializer_class(self) -> Any:
        return WorkloadDetailSerializer if self.action == "retrieve" else WorkloadSerializer

    @extend_schema(responses={200: WorkloadDetailSerializer})
    def retrieve(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        rows = self.in_cluster(
            named(visible_workloads(request.user, visible_clusters(request.user).values("pk")))
        ).filter(namespace=kwargs["namespace"], name=kwargs["name"])
        on = sorted(set(rows.order_by().values_list("cluster__name", flat=True)))
        if len(on) > 1:
            raise DomainError(
                self.several(kwargs["namespace"], kwargs["name"], on), code="ambiguous"
            )
        workload = rows.select_related("cluster").first()
        if workload is None:
            raise NotFound("No workload of that name that you may see.")
        return Response(WorkloadDetailSerializer(self.detailed(workload)).data)

    def several(self, namespace: str, name: str, on: list[str]) -> str:
        return ambiguous(self.request, self.kind, f"{namespace}/{name}", on)

    def detailed(self, workload: ObservedWorkload) -> ObservedWorkload:
        """The workload with what its page shows beyond its row, redacted for the asker."""
        names = pod_names_for(self.request.user)
        shown_for(workload, names)
        detail: Any = workload
        if detail.state == "finished":  # nothing waits: no "not explained yet"
            detail.why = detail.estimate = None
        events = events_of(workload)
        detail.story = story(workload, events, names)
        detail.events = [event_moment(event, names) for event in events]
        detail.pods = pods_of(workload)
        detail.gpu_hours = gpu_hours(
            cluster_id=detail.cluster_id,
            namespace=workload.namespace,
            name=workload.name,
            created_at=workload.created_at,
            now=timezone.now(),
        )
        return workload
