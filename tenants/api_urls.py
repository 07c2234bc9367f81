from django.urls import path

from portal.api.routers import app_router
from tenants.api import (
    MembershipViewSet,
    MeView,
    NamespaceViewSet,
    PriorityClassViewSet,
    TeamMembersView,
    TeamMemberView,
    TeamViewSet,
)

router = app_router()
router.register("teams", TeamViewSet, basename="team")
router.register("memberships", MembershipViewSet, basename="membership")
router.register("namespaces", NamespaceViewSet, basename="namespace")
router.register("priority-classes", PriorityClassViewSet, basename="priority-class")
urlpatterns = [
    *router.urls,
    path("me/", MeView.as_view(), name="me"),
    path("teams/<slug:slug>/members/", TeamMembersView.as_view(), name="team-members-api"),
    path(
        "teams/<slug:slug>/members/<str:username>/",
        TeamMemberView.as_view(),
        name="team-member-api",
    ),
]

# Under /api/v1/clusters/<cluster>/ (portal/api/urls.py): one cluster's rows.
in_cluster = app_router()
in_cluster.register("namespaces", NamespaceViewSet, basename="cluster-namespace")
cluster_urlpatterns = in_cluster.urls
