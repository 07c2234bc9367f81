from django.urls import path

from health.api import GpuHealthView

urlpatterns = [path("gpu-health/", GpuHealthView.as_view(), name="gpu-health")]

# Under /api/v1/clusters/<cluster>/ (portal/api/urls.py): one cluster's rows.
cluster_urlpatterns = [path("gpu-health/", GpuHealthView.as_view(), name="cluster-gpu-health")]
