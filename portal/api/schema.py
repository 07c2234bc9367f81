"""The OpenAPI schema, as exact as the API: strict input bodies are closed, lists that must
not be empty say so, and every operation documents the one error format and the answers
its headers earn."""

from __future__ import annotations

from typing import Any

from drf_spectacular import openapi
from drf_spectacular.plumbing import get_doc
from drf_spectacular.utils import OpenApiParameter
from rest_framework import serializers

from portal.api.safety import StrictInput

CLUSTER_NAME = "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
CLUSTER_PATH = OpenApiParameter(
    "cluster",
    {"type": "string", "pattern": CLUSTER_NAME, "maxLength": 63},
    OpenApiParameter.PATH,
    description="The cluster's name (`GET /api/v1/clusters/`); another name is a 404 whose "
    "`clusters` are the names there are (platform admins; an empty list for others).",
)

ERROR = {
    "type": "object",
    "properties": {
        "detail": {"type": "string"},
        "code": {"type": "string"},
        # Per field a list of messages; list and nested fields nest by index or key.
        "errors": {"type": "object", "additionalProperties": {}},
        # A nested route's unknown cluster: the names there are (for platform admins).
        "clusters": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["detail"],
}
ERRORS = (
    ("400", "Invalid input: field errors under `errors`."),
    ("401", "Not authenticated, or the token is invalid, expired or revoked."),
    ("403", "Authenticated but not allowed."),
    (
        "404",
        "Not found (other teams' objects are not found either); on "
        "`/api/v1/clusters/{cluster}/…` a cluster no cluster is, its `clusters` the names "
        "there are (platform admins; empty for others).",
    ),
    (
        "409",
        "Refused in the current state "
        "(self_approval, illegal_transition, stale_assessment, conflict), or a name several "
        "clusters have on a route without the cluster (ambiguous: the message names the "
        "clusters and the addresses to use).",
    ),
    ("429", "Too many requests for this token."),
)
# Answers that only some operations give: by the headers they take, or their body.
IF_MATCH_ERRORS = (
    ("412", "If-Match names another version than the current one (precondition_failed)."),
)
IF_MATCH_REQUIRED_ERRORS = (
    ("428", "If-Match is required here and was not sent (precondition_required)."),
)
IDEMPOTENCY_ERRORS = (
    ("422", "This Idempotency-Key was used with another body (idempotency_key_reused)."),
)
BODY_ERRORS = (("415", "The body is not JSON (`Content-Type: application/json`)."),)
# Before the portal: the server (gunicorn, as in the image) reads request lines up to 4094
# bytes and answers a longer one itself, in HTML.
URI_TOO_LONG = {
    "description": "The request line is longer than the server reads (4094 bytes with the "
    "image's gunicorn); the server answers, in HTML.",
    "content": {"text/html": {"schema": {"type": "string"}}},
}


class AutoSchema(openapi.AutoSchema):
    """drf-spectacular's, plus what our serializers promise: an input serializer that
    refuses unknown fields (:class:`StrictInput`) is a closed object, and a list or map that
    may not be empty has ``minItems`` / ``minProperties``."""

    def get_override_parameters(self) -> list[Any]:
        """A nested route's ``{cluster}`` is the cluster's name (drf-spectacular would
        take the model's ``cluster`` key, a number)."""
        parameters: list[Any] = super().get_override_parameters()
        if "{cluster}" in self.path:
            parameters = [*parameters, CLUSTER_PATH]
        return parameters

    def _map_basic_serializer(self, serializer: Any, direction: str) -> dict[str, Any]:
        schema: dict[str, Any] = super()._map_basic_serializer(serializer, direction)
        if isinstance(serializer, StrictInput) or (
            isinstance(serializer, type) and issubclass(serializer, StrictInput)
        ):
            schema["additionalProperties"] = False
            if schema.get("description") == get_doc(StrictInput):
                del schema["description"]  # the mixin's docstring, not the serializer's
        return schema

    def _map_serializer_field(
        self, field: Any, direction: str, bypass_extensions: bool = False
    ) -> dict[str, Any]:
        schema: dict[str, Any] = super()._map_serializer_field(field, direction, bypass_extensions)
        if getattr(field, "allow_empty", True) is False:
            if isinstance(field, serializers.ListField) and schema.get("type") == "array":
                schema.setdefault("minItems", 1)
            elif isinstance(field, serializers.DictField) and schema.get("type") == "object":
                schema.setdefault("minProperties", 1)
        return schema


def add_error_responses(
    result: dict[str, Any], generator: Any, request: Any, public: bool
) -> dict[str, Any]:
    """The error format on every operation, with the answers each one can give."""
    result.setdefault("components", {}).setdefault("schemas", {})["Error"] = ERROR
    ref = {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}
    for methods in result.get("paths", {}).values():
        for operation in methods.values():
            responses = operation.setdefault("responses", {})
            for code, text in _errors_of(operation):
                responses.setdefault(code, {"description": text, "content": ref})
            responses.setdefault("414", URI_TOO_LONG)
    return result


def _errors_of(operation: dict[str, Any]) -> tuple[tuple[str, str], ...]:
    headers = {
        p["name"].lower(): p for p in operation.get("parameters", []) if p.get("in") == "header"
    }
    errors: tuple[tuple[str, str], ...] = ERRORS
    if "if-match" in headers:
        errors += IF_MATCH_ERRORS
        if headers["if-match"].get("required"):
            errors += IF_MATCH_REQUIRED_ERRORS
    if "idempotency-key" in headers:
        errors += IDEMPOTENCY_ERRORS
    if "requestBody" in operation:
        errors += BODY_ERRORS
    return errors


def query_values_are_not_empty(
    result: dict[str, Any], generator: Any, request: Any, public: bool
) -> dict[str, Any]:
    """A query parameter you send takes a value: ``?team=`` is a 400, not "every team"
    (:func:`portal.api.safety.repeated_or_empty`), so a free string says ``minLength: 1``."""
    for methods in result.get("paths", {}).values():
        for operation in methods.values():
            for parameter in operation.get("parameters", []):
                schema = parameter.get("schema", {})
                free = not ({"enum", "pattern", "format"} & set(schema))
                if parameter.get("in") == "query" and schema.get("type") == "string" and free:
                    schema.setdefault("minLength", 1)
    return result


# What a free string of a request may hold (portal/vocabulary/text.py): no control
# character but line breaks and tabs, no bidi override or isolate.
PLAIN_TEXT = "^[^\\x00-\\x08\\x0b\\x0c\\x0e-\\x1f\\x7f-\\x9f\\u202a-\\u202e\\u2066-\\u2069]*$"


def _plain(schema: Any) -> None:
    """Give every free string in ``schema`` (no enum, pattern or format) the plain-text
    pattern, through objects, arrays and combinations."""
    if not isinstance(schema, dict):
        return
    if schema.get("type") == "string" and not ({"enum", "pattern", "format"} & set(schema)):
        schema["pattern"] = PLAIN_TEXT
    for key in ("properties", "patternProperties"):
        for child in (schema.get(key) or {}).values():
            _plain(child)
    for key in ("items", "additionalProperties", "not"):
        _plain(schema.get(key))
    for key in ("allOf", "anyOf", "oneOf"):
        for child in schema.get(key) or []:
            _plain(child)


def free_text_is_plain(
    result: dict[str, Any], generator: Any, request: Any, public: bool
) -> dict[str, Any]:
    """Every free string a request sends (query parameters, request bodies) says it holds no
    control character or bidi override: each is a 400 naming the field
    (portal/infra/middleware.py, portal/api/parsers.py)."""
    for methods in result.get("paths", {}).values():
        for operation in methods.values():
            for parameter in operation.get("parameters", []):
                if parameter.get("in") == "query":
                    _plain(parameter.get("schema"))
            for media in operation.get("requestBody", {}).get("content", {}).values():
                _plain(media.get("schema"))
    for name, schema in result.get("components", {}).get("schemas", {}).items():
        if name.endswith("Request"):
            _plain(schema)
    return result


def nested_routes_name_the_cluster_once(
    result: dict[str, Any], generator: Any, request: Any, public: bool
) -> dict[str, Any]:
    """On ``/api/v1/clusters/{cluster}/…`` the path names the cluster: the flat route's
    ``?cluster=`` filter is not offered there again."""
    for path, methods in result.get("paths", {}).items():
        if "{cluster}" not in path:
            continue
        for operation in methods.values():
            if "parameters" in operation:
                operation["parameters"] = [
                    p
                    for p in operation["parameters"]
                    if not (p.get("in") == "query" and p.get("name") == "cluster")
                ]
    return result
