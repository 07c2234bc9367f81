"""The served OpenAPI schema, generated once per process.

drf-spectacular's generator is not safe to run in two threads at once (it hands each view's
shared schema object the registry of the generation in progress): two clients fetching
``/api/schema/`` together broke one of them. The schema changes only with the code, so it
is generated under a lock the first time and served from memory afterwards.
"""

from __future__ import annotations

import threading
from typing import Any

from django.conf import settings
from drf_spectacular.views import SpectacularAPIView
from rest_framework.request import Request
from rest_framework.response import Response

_LOCK = threading.Lock()
_SCHEMAS: dict[tuple[Any, ...], Any] = {}


class SchemaView(SpectacularAPIView):
    def _get_schema_response(self, request: Request) -> Response:
        version = self.api_version or request.version or self._get_version_parameter(request)
        key = (version, self.urlconf, settings.ROOT_URLCONF, self.serve_public)
        with _LOCK:
            if key not in _SCHEMAS:
                generator = self.generator_class(
                    urlconf=self.urlconf, api_version=version, patterns=self.patterns
                )
                _SCHEMAS[key] = generator.get_schema(request=request, public=self.serve_public)
        return Response(
            data=_SCHEMAS[key],
            headers={
                "Content-Disposition": f'inline; filename="{self._get_filename(request, version)}"'
            },
        )
