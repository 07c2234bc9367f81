from changes.api import MigChangeViewSet, QuotaRequestViewSet
from portal.api.routers import app_router

router = app_router()
router.register("quota-requests", QuotaRequestViewSet, basename="quota-request")
router.register("mig-changes", MigChangeViewSet, basename="mig-change")
urlpatterns = router.urls
