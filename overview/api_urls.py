from django.urls import path

from overview.api import MigPlanView, OffboardView, OnboardingView

urlpatterns = [
    path("mig-plan/", MigPlanView.as_view(), name="mig-plan"),
    path("onboarding/", OnboardingView.as_view(), name="onboarding"),
    path("teams/<slug:slug>/offboard/", OffboardView.as_view(), name="team-offboard-api"),
]

# Under /api/v1/clusters/<cluster>/ (portal/api/urls.py): one cluster's plan.
cluster_urlpatterns = [path("mig-plan/", MigPlanView.as_view(), name="cluster-mig-plan")]
