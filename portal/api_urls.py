"""Routes of the REST API (``/api/v1/``) and its schema (``/api/schema/``, ``/api/docs/``)."""

from django.http import HttpRequest, JsonResponse
from django.urls import include, path, re_path
from django.views.decorators.csrf import csrf_exempt
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView
from rest_framework.routers import DefaultRouter

from fleet.api import (
    DriftView,
    GpuHealthView,
    MigChangeViewSet,
    MigConfigsViewSet,
    NodePoolViewSet,
    NodeViewSet,
    OperatorCheckView,
    WaitingView,
)
from portal.api import AuditEventViewSet, ManifestsView, SyncStatusView, TokenViewSet
from queues.api import ClusterQueueViewSet, CohortViewSet, LocalQueueViewSet, ResourceFlavorViewSet
from tenants.api import (
    MembershipViewSet,
    NamespaceViewSet,
    PriorityClassViewSet,
    QuotaRequestViewSet,
    TeamViewSet,
)
from usage.api import ReportView

router = DefaultRouter()
router.register("tokens", TokenViewSet, basename="token")
router.register("teams", TeamViewSet, basename="team")
router.register("memberships", MembershipViewSet, basename="membership")
router.register("namespaces", NamespaceViewSet, basename="namespace")
router.register("priority-classes", PriorityClassViewSet, basename="priority-class")
router.register("cohorts", CohortViewSet, basename="cohort")
router.register("quota-requests", QuotaRequestViewSet, basename="quota-request")
router.register("resource-flavors", ResourceFlavorViewSet, basename="resource-flavor")
router.register("cluster-queues", ClusterQueueViewSet, basename="cluster-queue")
router.register("local-queues", LocalQueueViewSet, basename="local-queue")
router.register("nodes", NodeViewSet, basename="node")
router.register("node-pools", NodePoolViewSet, basename="node-pool")
router.register("mig-configs", MigConfigsViewSet, basename="mig-config")
router.register("mig-changes", MigChangeViewSet, basename="mig-change")
router.register("audit", AuditEventViewSet, basename="audit")

urlpatterns = [
    path("v1/", include(router.urls)),
    path("v1/sync-status/", SyncStatusView.as_view(), name="sync-status"),
    path("v1/waiting/", WaitingView.as_view(), name="waiting"),
    path("v1/gpu-health/", GpuHealthView.as_view(), name="gpu-health"),
    path("v1/drift/", DriftView.as_view(), name="drift"),
    path("v1/gpu-operator-check/", OperatorCheckView.as_view(), name="gpu-operator-check"),
    path(
        "v1/reports/<str:name>/",
        ReportView.as_view(),
        name="report",
    ),
    path("v1/manifests/", ManifestsView.as_view(), name="manifests"),
    path("schema/", SpectacularAPIView.as_view(), name="schema"),
    path("docs/", SpectacularSwaggerView.as_view(url_name="schema"), name="api-docs"),
]


@csrf_exempt  # nothing is written; a refused CSRF check would answer in HTML
def not_found(request: HttpRequest, rest: str = "") -> JsonResponse:
    """Unknown API paths answer in the API's error format, never an HTML page, whatever
    the method."""
    return JsonResponse({"detail": "Not found.", "code": "not_found"}, status=404)


urlpatterns.append(re_path(r"^(?P<rest>.*)$", not_found))
