"""API errors sorted into what a retry can fix and what it cannot."""

from __future__ import annotations

import re
from typing import Any


class KubeError(Exception):
    """An error from the Kubernetes API or the way to it; ``message`` is for people."""

    def __init__(
        self, message: str, *, status: int = 0, reason: str = "", body: dict[str, Any] | None = None
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.reason = reason
        self.body = body or {}

    @property
    def causes(self) -> list[dict[str, str]]:
        return list((self.body.get("details") or {}).get("causes") or [])


class RetryableKubeError(KubeError):
    """Connection failures, timeouts, 429, 5xx (a webhook that is down): try again later."""


class PermanentKubeError(KubeError):
    """The request itself is wrong (400, 403, 404, 415, 422...): retrying cannot help."""


class NotFound(PermanentKubeError):
    pass


_CONFLICT_WITH = re.compile(r'conflict with "([^"]*)"(?: using \S+)?$')


class ApplyConflict(PermanentKubeError):
    """Server-side apply found fields owned by another manager with other values."""

    @property
    def fields(self) -> list[tuple[str, str]]:
        """(manager, field path) pairs, e.g. ("kubectl-edit", ".spec.hard.pods")."""
        out = []
        for cause in self.causes:
            # 'conflict with "portal"', or for an Update manager 'conflict with "kubectl-patch"
            # using v1' (the version it wrote with).
            found = _CONFLICT_WITH.match(cause.get("message", ""))
            manager = found.group(1) if found else cause.get("message", "")
            out.append((manager, cause.get("field", "")))
        return out


_BUDGET = re.compile(r"The disruption budget (\S+) ")


class EvictionBlocked(RetryableKubeError):
    """A PodDisruptionBudget does not allow this eviction now (429)."""

    @property
    def budget(self) -> str:
        """The budget's name, from the DisruptionBudget cause ("The disruption budget
        serving-pdb needs 2 healthy pods and has 2 currently"); "" when none names it."""
        for cause in self.causes:
            found = _BUDGET.match(cause.get("message", ""))
            if cause.get("reason") == "DisruptionBudget" and found:
                return found.group(1)
        return ""

    @property
    def budget_says(self) -> str:
        """The DisruptionBudget cause's own words (how many healthy pods it needs)."""
        return next(
            (c.get("message", "") for c in self.causes if c.get("reason") == "DisruptionBudget"),
            "",
        )


def from_response(status: int, body: dict[str, Any], *, fallback: str) -> KubeError:
    """Map an error response to the right error class, keeping the server's message."""
    message = str(body.get("message") or fallback)
    reason = str(body.get("reason") or "")
    kwargs: dict[str, Any] = {"status": status, "reason": reason, "body": body}
    if status == 404:
        return NotFound(message, **kwargs)
    if status == 409 and any(
        c.get("reason") == "FieldManagerConflict"
        for c in (body.get("details") or {}).get("causes") or []
    ):
        return ApplyConflict(message, **kwargs)
    if status == 429 and any(
        c.get("reason") == "DisruptionBudget"
        for c in (body.get("details") or {}).get("causes") or []
    ):
        return EvictionBlocked(message, **kwargs)
    if status in (409, 429) or status >= 500:
        if status == 500 and "field not declared in schema" in message:
            return PermanentKubeError(message, **kwargs)
        return RetryableKubeError(message, **kwargs)
    return PermanentKubeError(message, **kwargs)
