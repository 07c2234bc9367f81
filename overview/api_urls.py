from django.urls import path

from overview.api import MigPlanView, OffboardView, OnboardingView
from overview.workload_api import WorkloadViewSet

WORKLOAD_LIST = WorkloadViewSet.as_view({"get": "list"})
WORKLOAD_DETAIL = WorkloadViewSet.as_view({"get": "retrieve"})

urlpatterns = [
    path("mig-plan/", MigPlanView.as_view(), name="mig-plan"),
    path("onboarding/", OnboardingView.as_view(), name="onboarding"),
    path("teams/<slug:slug>/offboard/", OffboardView.as_view(), name="team-offboard-api"),
    path("workloads/", WORKLOAD_LIST, name="workload-list"),
    path("workloads/<str:namespace>/<str:name>/", WORKLOAD_DETAIL, name="workload-detail"),
]

# Under /api/v1/clusters/<cluster>/ (portal/api/urls.py): one cluster's plan.
cluster_urlpatterns = [
    path("mig-plan/", MigPlanView.as_view(), name="cluster-mig-plan"),
    path("workloads/", WORKLOAD_LIST, name="cluster-workload-list"),
    path("workloads/<str:namespace>/<str:name>/", WORKLOAD_DETAIL, name="cluster-workload-detail"),
]
