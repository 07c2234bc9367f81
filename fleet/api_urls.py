from fleet.api import NodePoolViewSet
from portal.api.routers import app_router

router = app_router()
router.register("node-pools", NodePoolViewSet, basename="node-pool")
urlpatterns = router.urls

# Under /api/v1/clusters/<cluster>/ (portal/api/urls.py): one cluster's rows.
in_cluster = app_router()
in_cluster.register("node-pools", NodePoolViewSet, basename="cluster-node-pool")
cluster_urlpatterns = in_cluster.urls
