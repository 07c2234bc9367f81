from django.urls import path

from portal.routers import app_router
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
