"""The API's routers: each app registers its viewsets on its own (``<app>/api_urls.py``),
and ``portal/api/urls.py`` includes them by name and serves the one root listing them."""

from __future__ import annotations

from rest_framework.routers import DefaultRouter


def app_router() -> DefaultRouter:
    """A router for one app's viewsets: format suffixes as everywhere, no root view of its
    own (the API has one root, ``/api/v1/``)."""
    router = DefaultRouter()
    router.include_root_view = False
    return router
