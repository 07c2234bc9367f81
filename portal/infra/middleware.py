"""Input no view can store: a NUL character (PostgreSQL text cannot hold one) in a query
parameter or a form field is refused with 400 and the field's name before any view runs, so
that no page or endpoint answers 500 to it. (JSON bodies are the serializers' to refuse,
field by field, with the same words.)"""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse, JsonResponse, QueryDict

NUL_REFUSED = "Null characters are not allowed."  # Django's and DRF's own words


class RefuseNulMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        fields = _fields_with_nul(request)
        if not fields:
            return self.get_response(request)
        errors = {name: [NUL_REFUSED] for name in fields}
        if request.path.startswith("/api/"):
            return JsonResponse(
                {"detail": "Invalid input.", "code": "invalid", "errors": errors}, status=400
            )
        words = "; ".join(f"{name}: {NUL_REFUSED}" for name in fields)
        return HttpResponse(f"Invalid input. {words}", status=400, content_type="text/plain")


def _fields_with_nul(request: HttpRequest) -> list[str]:
    found = ["path"] if "\x00" in request.path else []
    found += _nul_in(request.GET)
    kind = request.META.get("CONTENT_TYPE", "")
    if request.method == "POST" and kind.startswith(
        ("application/x-www-form-urlencoded", "multipart/form-data")
    ):
        found += _nul_in(request.POST)
    return found


def _nul_in(data: QueryDict) -> list[str]:
    return sorted(
        {name.replace("\x00", "\\u0000") for name, values in data.lists() if "\x00" in name}
        | {name for name, values in data.lists() if any("\x00" in v for v in values)}
    )
