from django.urls import path

from usage.api import ReportView

urlpatterns = [path("reports/<str:name>/", ReportView.as_view(), name="report")]
