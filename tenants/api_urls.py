from portal.routers import app_router
from tenants.api import MembershipViewSet, NamespaceViewSet, PriorityClassViewSet, TeamViewSet

router = app_router()
router.register("teams", TeamViewSet, basename="team")
router.register("memberships", MembershipViewSet, basename="membership")
router.register("namespaces", NamespaceViewSet, basename="namespace")
router.register("priority-classes", PriorityClassViewSet, basename="priority-class")
urlpatterns = router.urls
