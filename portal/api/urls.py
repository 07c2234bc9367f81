"""Routes of the REST API (``/api/v1/``) and its schema (``/api/schema/``, ``/api/docs/``).

Each app's routes are in its ``api_urls.py``, included here by name (the ground floor
imports no app); the root lists every resource by its route name. An app's
``cluster_urlpatterns`` are its cluster-scoped resources, served again under
``/api/v1/clusters/<cluster>/`` (their canonical address; ``cluster.api_scope``)."""

from importlib import import_module
from typing import Any

from django.http import HttpRequest, JsonResponse
from django.urls import include, path, re_path
from django.views.decorators.csrf import csrf_exempt
from drf_spectacular.views import SpectacularSwaggerSplitView
from rest_framework.routers import APIRootView

from portal.api.routers import app_router
from portal.api.schema_view import SchemaView
from portal.api.views import AuditEventViewSet, TokenViewSet
from portal.notifications.api import (
    NotificationPreferenceView,
    NotificationViewSet,
    SubscriptionViewSet,
)

router = app_router()
router.register("tokens", TokenViewSet, basename="token")
router.register("audit", AuditEventViewSet, basename="audit")
router.register("notifications", NotificationViewSet, basename="notification")
router.register(
    "notification-subscriptions", SubscriptionViewSet, basename="notification-subscription"
)

API_APPS = (
    "tenants",
    "queues",
    "fleet",
    "loop",
    "changes",
    "health",
    "idle",
    "diagnostics",
    "usage",
    "costs",
    "budgets",
    "overview",
)
ROOT = {
    "me": "me",
    "tokens": "token-list",
    "teams": "team-list",
    "memberships": "membership-list",
    "namespaces": "namespace-list",
    "priority-classes": "priority-class-list",
    "cohorts": "cohort-list",
    "quota-requests": "quota-request-list",
    "resource-flavors": "resource-flavor-list",
    "cluster-queues": "cluster-queue-list",
    "local-queues": "local-queue-list",
    "clusters": "cluster-list",
    "nodes": "node-list",
    "node-pools": "node-pool-list",
    "mig-configs": "mig-config-list",
    "mig-changes": "mig-change-list",
    "mig-plan": "mig-plan",
    "budgets": "budget-list",
    "budget-extensions": "budget-extension-list",
    "idle": "idle",
    "audit": "audit-list",
    "notifications": "notification-list",
    "notification-subscriptions": "notification-subscription-list",
    "notification-preference": "notification-preference",
}


def in_cluster(app: str) -> list[Any]:
    """An app's routes of one cluster's rows (none when it has no cluster-scoped ones)."""
    return list(getattr(import_module(f"{app}.api_urls"), "cluster_urlpatterns", []))


urlpatterns = [
    path("v1/", APIRootView.as_view(api_root_dict=ROOT), name="api-root"),
    path(
        "v1/notification-preference/",
        NotificationPreferenceView.as_view(),
        name="notification-preference",
    ),
    path("v1/", include(router.urls)),
    *(path("v1/", include(f"{app}.api_urls")) for app in API_APPS),
    re_path(
        r"^v1/clusters/(?P<cluster>[a-z0-9-]+)/",
        include([route for app in API_APPS for route in in_cluster(app)]),
    ),
    path("schema/", SchemaView.as_view(), name="schema"),
    path("docs/", SpectacularSwaggerSplitView.as_view(url_name="schema"), name="api-docs"),
]


@csrf_exempt  # nothing is written; a refused CSRF check would answer in HTML
def not_found(request: HttpRequest, rest: str = "") -> JsonResponse:
    """Unknown API paths answer in the API's error format, never an HTML page, whatever
    the method."""
    return JsonResponse({"detail": "Not found.", "code": "not_found"}, status=404)


urlpatterns.append(re_path(r"^(?P<rest>.*)$", not_found))
