from django.urls import path

from portal.api.routers import app_router
from queues.api import (
    ClusterQueueViewSet,
    CohortViewSet,
    LocalQueueViewSet,
    ResourceFlavorViewSet,
    WhatIfView,
)

router = app_router()
router.register("cohorts", CohortViewSet, basename="cohort")
router.register("resource-flavors", ResourceFlavorViewSet, basename="resource-flavor")
router.register("cluster-queues", ClusterQueueViewSet, basename="cluster-queue")
router.register("local-queues", LocalQueueViewSet, basename="local-queue")
urlpatterns = [*router.urls, path("what-if/", WhatIfView.as_view(), name="what-if")]

# Under /api/v1/clusters/<cluster>/ (portal/api/urls.py): one cluster's rows.
in_cluster = app_router()
in_cluster.register("cohorts", CohortViewSet, basename="cluster-cohort")
in_cluster.register("resource-flavors", ResourceFlavorViewSet, basename="cluster-resource-flavor")
in_cluster.register("cluster-queues", ClusterQueueViewSet, basename="cluster-cluster-queue")
in_cluster.register("local-queues", LocalQueueViewSet, basename="cluster-local-queue")
cluster_urlpatterns = [
    *in_cluster.urls,
    path("what-if/", WhatIfView.as_view(), name="cluster-what-if"),
]
