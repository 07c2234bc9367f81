"""REST API of queues (read-only here; admins edit through the admin or the services)."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers, viewsets

from queues.models import ClusterQueue, LocalQueue, ResourceFlavor
from tenants.selectors import list_teams_for_user


class ResourceFlavorSerializer(serializers.ModelSerializer[ResourceFlavor]):
    class Meta:
        model = ResourceFlavor
        fields = [
            "name",
            "node_labels",
            "node_taints",
            "tolerations",
            "topology_name",
            "description",
        ]


class ResourceFlavorViewSet(viewsets.ReadOnlyModelViewSet[ResourceFlavor]):
    serializer_class = ResourceFlavorSerializer
    queryset = ResourceFlavor.objects.all()
    lookup_field = "name"


class ClusterQueueSerializer(serializers.ModelSerializer[ClusterQueue]):
    cohort = serializers.SlugRelatedField(slug_field="name", read_only=True)

    class Meta:
        model = ClusterQueue
        fields = [
            "name",
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


class ClusterQueueViewSet(viewsets.ReadOnlyModelViewSet[ClusterQueue]):
    serializer_class = ClusterQueueSerializer
    lookup_field = "name"

    def get_queryset(self) -> Any:
        return ClusterQueue.objects.select_related("cohort")


class LocalQueueSerializer(serializers.ModelSerializer[LocalQueue]):
    namespace = serializers.SlugRelatedField(slug_field="name", read_only=True)
    cluster_queue = serializers.SlugRelatedField(slug_field="name", read_only=True)

    class Meta:
        model = LocalQueue
        fields = ["id", "name", "namespace", "cluster_queue", "stop_policy", "description"]


class LocalQueueViewSet(viewsets.ReadOnlyModelViewSet[LocalQueue]):
    """LocalQueues of your teams' namespaces."""

    serializer_class = LocalQueueSerializer

    def get_queryset(self) -> Any:
        teams = list_teams_for_user(self.request.user)
        return LocalQueue.objects.filter(namespace__team__in=teams).select_related(
            "namespace", "cluster_queue"
        )


class CohortSerializer(serializers.ModelSerializer[Any]):
    parent = serializers.SlugRelatedField(slug_field="name", read_only=True, allow_null=True)

    class Meta:
        from queues.models import Cohort

        model = Cohort
        fields = ["name", "parent", "fair_sharing_weight", "resource_groups", "description"]


class CohortViewSet(viewsets.ReadOnlyModelViewSet[Any]):
    serializer_class = CohortSerializer
    lookup_field = "name"

    def get_queryset(self) -> Any:
        from queues.models import Cohort

        return Cohort.objects.select_related("parent")
