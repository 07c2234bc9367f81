"""URL routes."""

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

from fleet import change_views
from fleet import views as fleet_views
from portal import views
from queues import views as queue_views
from tenants import views as tenant_views
from usage import views as usage_views

urlpatterns = [
    path("", views.home, name="home"),
    path("fleet/", fleet_views.fleet, name="fleet"),
    path("fleet/gpu-operator/", fleet_views.operator_check, name="operator-check"),
    path("fleet/nodes/<str:name>/", fleet_views.node_detail, name="fleet-node"),
    path("fleet/troubleshooting/", fleet_views.troubleshooting, name="troubleshooting"),
    path("queues/", queue_views.overview, name="queues"),
    path(
        "queues/cluster-queues/<str:name>/edit/",
        queue_views.cluster_queue_edit,
        name="cluster-queue-edit",
    ),
    path(
        "queues/priority-classes/<str:name>/edit/",
        queue_views.priority_class_edit,
        name="priority-class-edit",
    ),
    path("reports/", usage_views.reports_page, name="reports"),
    path("reports/<str:name>.csv", usage_views.report_csv, name="report-csv"),
    path("quota/", tenant_views.quota_list, name="quota-list"),
    path("quota/new/", tenant_views.quota_new, name="quota-new"),
    path("quota/<int:pk>/", tenant_views.quota_detail, name="quota-detail"),
    path("quota/<int:pk>/<str:action>/", tenant_views.quota_action, name="quota-action"),
    path("changes/", change_views.change_list, name="change-list"),
    path("changes/new/", change_views.change_new, name="change-new"),
    path("changes/preview/", change_views.change_preview, name="change-preview"),
    path("changes/<int:pk>/", change_views.change_detail, name="change-detail"),
    path("changes/<int:pk>/<str:action>/", change_views.change_action, name="change-action"),
    path("login/", views.LoginView.as_view(), name="login"),
    path("oidc/authenticate/", views.sso_start, name="oidc_authentication_init"),
    path("oidc/callback/", views.sso_callback, name="oidc_authentication_callback"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("healthz", views.healthz, name="healthz"),
    path("readyz", views.readyz, name="readyz"),
    path("metrics", views.metrics, name="metrics"),
    path("tokens/", views.tokens, name="tokens"),
    path("audit/", views.audit, name="audit"),
    path("admin/", admin.site.urls),
    path("api/", include("portal.api_urls")),
]
