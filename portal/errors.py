"""Errors that services raise and every interface (HTML, API, CLI) shows the same way."""

from __future__ import annotations


class DomainError(Exception):
    """A request that is well-formed but not allowed in the current state."""

    def __init__(self, message: str, *, code: str = "domain_error") -> None:
        super().__init__(message)
        self.message = message
        self.code = code
