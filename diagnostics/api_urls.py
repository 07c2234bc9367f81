from django.urls import path

from diagnostics.api import DriftView, OperatorCheckView, WaitingView

urlpatterns = [
    path("waiting/", WaitingView.as_view(), name="waiting"),
    path("drift/", DriftView.as_view(), name="drift"),
    path("gpu-operator-check/", OperatorCheckView.as_view(), name="gpu-operator-check"),
]

# Under /api/v1/clusters/<cluster>/ (portal/api/urls.py): one cluster's rows.
cluster_urlpatterns = [
    path("waiting/", WaitingView.as_view(), name="cluster-waiting"),
    path("drift/", DriftView.as_view(), name="cluster-drift"),
]
