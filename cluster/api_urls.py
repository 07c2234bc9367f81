from django.urls import path

from cluster.api import (
    ClusterViewSet,
    ManifestsView,
    MigConfigsViewSet,
    NodeViewSet,
    SyncStatusView,
)
from portal.routers import app_router

router = app_router()
router.register("clusters", ClusterViewSet, basename="cluster")
router.register("nodes", NodeViewSet, basename="node")
router.register("mig-configs", MigConfigsViewSet, basename="mig-config")
urlpatterns = [
    *router.urls,
    path("sync-status/", SyncStatusView.as_view(), name="sync-status"),
    path("manifests/", ManifestsView.as_view(), name="manifests"),
]
