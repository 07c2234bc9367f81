from fleet.api import NodePoolViewSet
from portal.routers import app_router

router = app_router()
router.register("node-pools", NodePoolViewSet, basename="node-pool")
urlpatterns = router.urls
