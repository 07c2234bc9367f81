"""The API's one body parser: JSON only, bounded in size and depth, answered in the API's
error shape (a body too big is 413, one nested too deep or not JSON is 400), never a 500."""

from __future__ import annotations

from typing import Any

import orjson
from django.conf import settings
from rest_framework import exceptions, status
from rest_framework.parsers import JSONParser

from portal.vocabulary.text import text_problem

# No request body of this API nests deeper than a ClusterQueue's resource groups (about 6).
MAX_DEPTH = 32
DEEP = f"The body nests deeper than {MAX_DEPTH} levels."


class BodyTooLarge(exceptions.APIException):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_detail = "The request body is too large."
    default_code = "too_large"


def too_deep(value: Any, limit: int = MAX_DEPTH) -> bool:
    """Whether ``value`` nests deeper than ``limit`` (iterative: no recursion to exhaust)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False


class BoundedJSONParser(JSONParser):
    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        raw = stream.read(limit + 1) if stream is not None else b""
        if limit is not None and len(raw) > limit:
            raise BodyTooLarge(f"The request body is larger than {limit} bytes.")
        try:
            data = orjson.loads(raw)  # refuses nesting past 1024 itself, without recursing
        except orjson.JSONDecodeError as exc:
            if "depth limit" in str(exc):
                raise exceptions.ParseError(DEEP) from exc
            raise exceptions.ParseError(f"The body is not valid JSON: {exc}") from exc
        if too_deep(data):
            raise exceptions.ParseError(DEEP)
        refused = unsafe_text(data)
        if refused:
            raise exceptions.ValidationError(refused)
        return data


def unsafe_text(value: Any) -> dict[str, list[str]]:
    """The fields of a body holding text free text may not hold (portal/vocabulary/text.py),
    by their path (``reason``, ``groups.0.name``), with why."""
    refused: dict[str, list[str]] = {}
    stack: list[tuple[str, Any]] = [("", value)]
    while stack:
        path, item = stack.pop()
        if isinstance(item, dict):
            for key, child in item.items():
                where = f"{path}.{key}" if path else str(key)
                problem = text_problem(str(key))
                if problem:
                    refused[where] = [problem]
                stack.append((where, child))
        elif isinstance(item, list):
            stack.extend((f"{path}.{index}", child) for index, child in enumerate(item))
        elif isinstance(item, str) and text_problem(item):
            refused[path or "body"] = [text_problem(item)]
    return dict(sorted(refused.items()))
