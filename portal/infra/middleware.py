"""Input no view may store: a NUL character (PostgreSQL text cannot hold one), and the
control characters and bidi overrides that free text may not hold (portal/vocabulary/text.py),
in a query parameter or a form field are refused with 400 and the field's name before any
view runs, so that no page or endpoint stores them or answers 500. (JSON bodies are the
API parser's and serializers' to refuse, field by field, with the same words.)"""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse, JsonResponse, QueryDict

from portal.vocabulary.text import text_problem

NUL_REFUSED = "Null characters are not allowed."  # Django's and DRF's own words


class RefuseNulMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        errors = _refused_fields(request)
        if not errors:
            return self.get_response(request)
        if request.path.startswith("/api/"):
            return JsonResponse(
                {"detail": "Invalid input.", "code": "invalid", "errors": errors}, status=400
            )
        words = "; ".join(f"{name}: {said[0]}" for name, said in errors.items())
        return HttpResponse(f"Invalid input. {words}", status=400, content_type="text/plain")


def _refused_fields(request: HttpRequest) -> dict[str, list[str]]:
    found = {"path": [NUL_REFUSED]} if "\x00" in request.path else {}
    found.update(_refused_in(request.GET))
    kind = request.META.get("CONTENT_TYPE", "")
    if request.method == "POST" and kind.startswith(
        ("application/x-www-form-urlencoded", "multipart/form-data")
    ):
        found.update(_refused_in(request.POST))
    return found


def _refused_in(data: QueryDict) -> dict[str, list[str]]:
    refused: dict[str, list[str]] = {}
    for name, values in data.lists():
        shown = name.replace("\x00", "\\u0000")
        if "\x00" in name or any("\x00" in value for value in values):
            refused[shown] = [NUL_REFUSED]
            continue
        problem = next(filter(None, (text_problem(v) for v in [name, *values])), "")
        if problem:
            refused[shown] = [problem]
    return dict(sorted(refused.items()))
