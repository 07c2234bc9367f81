from django.urls import path

from overview.api import MigPlanView

urlpatterns = [path("mig-plan/", MigPlanView.as_view(), name="mig-plan")]
