"""URL routes."""

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import path

from fleet import views as fleet_views
from portal import views

urlpatterns = [
    path("", views.home, name="home"),
    path("fleet/", fleet_views.fleet, name="fleet"),
    path("login/", auth_views.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("healthz", views.healthz, name="healthz"),
    path("admin/", admin.site.urls),
]
