"""URL routes: each app's pages are in its ``urls.py``, included here by name (the ground
floor imports no app)."""

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

from portal import views
from portal.notifications import views as notify_views

urlpatterns = [
    path("", include("overview.urls")),
    path("", include("diagnostics.urls")),
    path("", include("queues.urls")),
    path("", include("usage.urls")),
    path("", include("costs.urls")),
    path("", include("budgets.urls")),
    path("", include("idle.urls")),
    path("", include("changes.urls")),
    path("", include("cluster.urls")),
    path("login/", views.LoginView.as_view(), name="login"),
    path("oidc/authenticate/", views.sso_start, name="oidc_authentication_init"),
    path("oidc/callback/", views.sso_callback, name="oidc_authentication_callback"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("healthz", views.healthz, name="healthz"),
    path("readyz", views.readyz, name="readyz"),
    path("metrics", views.metrics, name="metrics"),
    path("tokens/", views.tokens, name="tokens"),
    path("notifications/", notify_views.notifications, name="notifications"),
    path(
        "notifications/settings/",
        notify_views.notification_settings,
        name="notification-settings",
    ),
    path("audit/", views.audit, name="audit"),
    path("audit/events.csv", views.audit_csv, name="audit-csv"),
    path("admin/", admin.site.urls),
    path("api/", include("portal.api.urls")),
]

handler403 = "portal.views.forbidden"
handler404 = "portal.views.not_found"
handler500 = "portal.views.server_error"
