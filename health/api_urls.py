from django.urls import path

from health.api import GpuHealthView

urlpatterns = [path("gpu-health/", GpuHealthView.as_view(), name="gpu-health")]
