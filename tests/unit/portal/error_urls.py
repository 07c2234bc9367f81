"""The portal's URLs and handlers, and one page that fails (for the 500 page's tests)."""

from django.http import HttpRequest, HttpResponse
from django.urls import path

from portal.urls import handler403, handler404, handler500, urlpatterns


def fails(request: HttpRequest) -> HttpResponse:
    raise RuntimeError("a bug in a view")


urlpatterns = [*urlpatterns, path("fails/", fails)]
__all__ = ["handler403", "handler404", "handler500", "urlpatterns"]
