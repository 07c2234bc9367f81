from django.urls import path

from usage import views

urlpatterns = [
    path("reports/", views.reports_page, name="reports"),
    path("reports/<str:name>.csv", views.report_csv, name="report-csv"),
]
