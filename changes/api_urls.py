from changes.api import (
    MigChangeViewSet,
    MigPolicyChangeViewSet,
    MigPolicyViewSet,
    QuotaRequestViewSet,
)
from portal.api.routers import app_router

router = app_router()
router.register("quota-requests", QuotaRequestViewSet, basename="quota-request")
router.register("mig-changes", MigChangeViewSet, basename="mig-change")
router.register("mig-policies", MigPolicyViewSet, basename="mig-policy")
router.register("mig-policy-changes", MigPolicyChangeViewSet, basename="mig-policy-change")
urlpatterns = router.urls
