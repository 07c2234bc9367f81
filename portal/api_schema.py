"""OpenAPI schema hooks: document the one error format on every operation."""

from __future__ import annotations

from typing import Any

ERROR = {
    "type": "object",
    "properties": {
        "detail": {"type": "string"},
        "code": {"type": "string"},
        # Per field a list of messages; list and nested fields nest by index or key.
        "errors": {"type": "object", "additionalProperties": {}},
    },
    "required": ["detail"],
}
ERRORS = (
    ("400", "Invalid input: field errors under `errors`."),
    ("401", "Not authenticated, or the token is invalid, expired or revoked."),
    ("403", "Authenticated but not allowed."),
    ("404", "Not found (other teams' objects are not found either)."),
    (
        "409",
        "Refused in the current state "
        "(self_approval, illegal_transition, stale_assessment, conflict).",
    ),
    ("429", "Too many requests for this token."),
)


def add_error_responses(
    result: dict[str, Any], generator: Any, request: Any, public: bool
) -> dict[str, Any]:
    result.setdefault("components", {}).setdefault("schemas", {})["Error"] = ERROR
    ref = {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}
    for methods in result.get("paths", {}).values():
        for operation in methods.values():
            responses = operation.setdefault("responses", {})
            for code, text in ERRORS:
                responses.setdefault(code, {"description": text, "content": ref})
    return result
