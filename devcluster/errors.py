"""API errors as the API server writes them (``kind: Status``, fixed key order)."""

from __future__ import annotations

from typing import Any

from devcluster.resources import Resource

REASONS = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    409: "Conflict",
    410: "Expired",
    415: "UnsupportedMediaType",
    422: "Invalid",
    429: "TooManyRequests",
    500: "",
    503: "ServiceUnavailable",
}


class APIError(Exception):
    def __init__(
        self,
        code: int,
        message: str,
        *,
        reason: str | None = None,
        details: dict[str, Any] | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.reason = REASONS.get(code, "") if reason is None else reason
        self.details = details
        self.metadata = metadata or {}

    def status(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": self.metadata,
            "status": "Failure",
            "message": self.message,
        }
        if self.reason:
            body["reason"] = self.reason
        if self.details is not None:
            body["details"] = self.details
        body["code"] = self.code
        return body


def _details(resource: Resource, name: str, kind: str | None = None) -> dict[str, Any]:
    details: dict[str, Any] = {"name": name}
    if resource.group:
        details["group"] = resource.group
    details["kind"] = kind or resource.plural
    return details


def not_found(resource: Resource, name: str) -> APIError:
    return APIError(
        404, f'{resource.group_resource} "{name}" not found', details=_details(resource, name)
    )


def already_exists(resource: Resource, name: str) -> APIError:
    return APIError(
        409,
        f'{resource.group_resource} "{name}" already exists',
        reason="AlreadyExists",
        details=_details(resource, name),
    )


def conflict_modified(resource: Resource, name: str) -> APIError:
    return APIError(
        409,
        f'Operation cannot be fulfilled on {resource.group_resource} "{name}": the object has '
        "been modified; please apply your changes to the latest version and try again",
        details=_details(resource, name),
    )


def invalid(resource: Resource, name: str, causes: list[dict[str, str]]) -> APIError:
    kind = f"{resource.kind}.{resource.group}" if resource.group else resource.kind
    parts = [f"{c['field']}: {c['message']}" for c in causes]
    summary = parts[0] if len(parts) == 1 else "[" + ", ".join(parts) + "]"
    return APIError(
        422,
        f'{kind} "{name}" is invalid: {summary}',
        details={**_details(resource, name, resource.kind), "causes": causes},
    )
