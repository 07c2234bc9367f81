from django.urls import path

from loop.api import ClusterViewSet, ManifestsView, MigConfigsViewSet, NodeViewSet, SyncStatusView
from portal.api.routers import app_router

router = app_router()
router.register("clusters", ClusterViewSet, basename="cluster")
router.register("nodes", NodeViewSet, basename="node")
router.register("mig-configs", MigConfigsViewSet, basename="mig-config")
urlpatterns = [
    *router.urls,
    path("sync-status/", SyncStatusView.as_view(), name="sync-status"),
    path("manifests/", ManifestsView.as_view(), name="manifests"),
]

# Under /api/v1/clusters/<cluster>/ (portal/api/urls.py): one cluster's rows.
in_cluster = app_router()
in_cluster.register("nodes", NodeViewSet, basename="cluster-node")
in_cluster.register("mig-configs", MigConfigsViewSet, basename="cluster-mig-config")
cluster_urlpatterns = [
    *in_cluster.urls,
    path("sync-status/", SyncStatusView.as_view(), name="cluster-sync-status"),
    path("manifests/", ManifestsView.as_view(), name="cluster-manifests"),
]
