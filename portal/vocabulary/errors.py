"""Errors that services raise and every interface (HTML, API, CLI) shows the same way."""

from __future__ import annotations


class DomainError(Exception):
    """A request that is well-formed but not allowed in the current state."""

    def __init__(self, message: str, *, code: str = "domain_error") -> None:
        super().__init__(message)
        self.message = message
        self.code = code


def user_message(exc: Exception) -> str:
    """The words to show a person for a refused request (a ``DomainError`` or Django's
    ``ValidationError``, whose field messages are joined)."""
    if isinstance(exc, DomainError):
        return exc.message
    message_dict = getattr(exc, "message_dict", None)
    if message_dict is not None:
        return " ".join(m for ms in message_dict.values() for m in ms)
    return " ".join(getattr(exc, "messages", [str(exc)]))
