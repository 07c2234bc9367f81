"""URLs of ``bench/api.py``'s server: the portal's, plus minimal DRF list views (the baseline).

The baseline views serve the same rows with the same fields and page size as the portal's
list endpoints, with nothing else: no authentication, permissions, throttling, scoping or
filters.
"""

from __future__ import annotations

from django.urls import path
from rest_framework import generics, permissions, serializers

from cluster.models import ObservedNode
from loop.api import NodeSerializer
from portal.urls import urlpatterns as portal_urlpatterns
from tenants.models import Namespace, Team


class BaselineTeamSerializer(serializers.ModelSerializer[Team]):
    namespaces = serializers.SlugRelatedField(many=True, read_only=True, slug_field="name")
    allowed_priority_classes = serializers.SlugRelatedField(
        many=True, read_only=True, slug_field="name"
    )

    class Meta:
        model = Team
        fields = ["slug", "name", "description", "namespaces", "allowed_priority_classes"]


class Minimal(generics.ListAPIView):  # type: ignore[type-arg]
    authentication_classes = []
    permission_classes = [permissions.AllowAny]
    throttle_classes = []
    filter_backends = []


# The serializers name each row's cluster: the baselines join it, as any list of theirs
# would (without it, a query per row).
class BaselineNodes(Minimal):
    serializer_class = NodeSerializer
    queryset = (
        ObservedNode.objects.filter(gone_since__isnull=True)
        .select_related("cluster")
        .order_by("name")
    )


class BaselineTeams(Minimal):
    serializer_class = BaselineTeamSerializer
    queryset = Team.objects.prefetch_related("namespaces", "allowed_priority_classes").order_by(
        "slug"
    )


class BaselineNamespaces(Minimal):
    queryset = (
        Namespace.objects.select_related("team", "cluster")
        .prefetch_related("quota_items", "limit_items")
        .order_by("name")
    )

    def get_serializer_class(self):  # type: ignore[no-untyped-def]
        from tenants.api import NamespaceSerializer

        return NamespaceSerializer


urlpatterns = [
    *portal_urlpatterns,
    path("baseline/nodes/", BaselineNodes.as_view()),
    path("baseline/teams/", BaselineTeams.as_view()),
    path("baseline/namespaces/", BaselineNamespaces.as_view()),
]
