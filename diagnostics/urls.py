from django.urls import path

from diagnostics import views

urlpatterns = [
    path("fleet/gpu-operator/", views.operator_check, name="operator-check"),
    path("fleet/troubleshooting/", views.troubleshooting, name="troubleshooting"),
]
