"""Request ids and structured logs: every log line of a request, and of the tasks it queued,
carries the same id (from the caller's X-Request-ID, or a new one)."""

from __future__ import annotations

import contextvars
import json
import logging
import re
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from django.http import HttpRequest, HttpResponse

from portal.infra import metrics

request_id: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="")
_VALID_ID = re.compile(r"^[A-Za-z0-9._:-]{1,64}$")
access_log = logging.getLogger("quartermaster.access")

# Attributes every LogRecord has; anything else was passed in ``extra=`` and is logged.
_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}


def new_request_id(offered: str = "") -> str:
    """The caller's id when it is a sane token, else a new random one."""
    return offered if _VALID_ID.match(offered or "") else uuid.uuid4().hex


class RequestIdFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        if not getattr(record, "request_id", ""):
            record.request_id = request_id.get()
        return True


# Characters that forge a line (CR, LF), drive a terminal (ESC and the other C0/C1
# controls) or reorder what a reader sees (bidi overrides and isolates): written as escapes.
_UNSAFE = {
    **{code: f"\\x{code:02x}" for code in (*range(0x20), 0x7F, *range(0x80, 0xA0))},
    **{code: f"\\u{code:04x}" for code in (*range(0x202A, 0x202F), *range(0x2066, 0x206A))},
    0x0A: "\\n",
    0x0D: "\\r",
    0x09: "\\t",
    0x2028: "\\u2028",
    0x2029: "\\u2029",
}


_BIDI = {code: escape for code, escape in _UNSAFE.items() if code > 0xFF}


def escape_controls(text: str) -> str:
    """``text`` on one line, with what a terminal or a reader would act on made visible."""
    return text.translate(_UNSAFE)


class TextFormatter(logging.Formatter):
    """The text logs' lines: a message carries no line break nor terminal control (an
    anonymous ``%0A`` in a path cannot forge an access-log line). Tracebacks stay as they
    are, after the line."""

    def formatMessage(self, record: logging.LogRecord) -> str:
        record.message = escape_controls(record.message)
        return super().formatMessage(record)


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, request_id, extras, exception."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        rid = getattr(record, "request_id", "") or request_id.get()
        if rid:
            entry["request_id"] = rid
        for key, value in vars(record).items():
            if key not in _STANDARD and key not in entry and not key.startswith("_"):
                entry[key] = value
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        # JSON escapes the controls; bidi overrides are written as escapes too (same text).
        return json.dumps(entry, default=str, ensure_ascii=False).translate(_BIDI)


class RequestIdMiddleware:
    """Sets the request id, answers with it, logs one access line and records the metrics."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        rid = new_request_id(request.headers.get("X-Request-ID", ""))
        token = request_id.set(rid)
        started = time.perf_counter()
        try:
            response = self.get_response(request)
        finally:
            request_id.reset(token)
        seconds = time.perf_counter() - started
        response["X-Request-ID"] = rid
        match = getattr(request, "resolver_match", None)
        route = (match.route or match.view_name) if match else "unmatched"
        metrics.observe_request(request.method or "GET", route, response.status_code, seconds)
        user = getattr(request, "user", None)
        access_log.info(
            "%s %s %s %.1fms",
            request.method,
            request.path,
            response.status_code,
            seconds * 1000,
            extra={
                "request_id": rid,
                "method": request.method,
                "path": request.path,
                "route": route,
                "status": response.status_code,
                "duration_ms": round(seconds * 1000, 1),
                "user": user.get_username() if user is not None and user.is_authenticated else "",
            },
        )
        return response
