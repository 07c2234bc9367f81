"""Idempotency-Key on POSTs and ETag / If-Match on decisions (two scripts never overwrite
each other silently, and a retried POST never acts twice)."""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.db import IntegrityError, models, transaction
from django.db.models import QuerySet
from drf_spectacular.utils import OpenApiParameter
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response

from portal.access.permissions import user_id
from portal.api.parsers import BodyTooLarge
from portal.models import IdempotencyRecord

M = TypeVar("M", bound=models.Model)

# The headers as the schema states them (``portal.api.schema`` adds the answers they earn:
# 412 and 428 for If-Match, 422 for Idempotency-Key).
IF_MATCH = OpenApiParameter(
    "If-Match",
    str,
    OpenApiParameter.HEADER,
    description="The ETag of your last read: the write is refused with 412 when the object "
    "changed since (`*`, empty or no header: no check).",
)
IF_MATCH_REQUIRED = OpenApiParameter(
    "If-Match",
    {"type": "string", "minLength": 1},
    OpenApiParameter.HEADER,
    required=True,
    description="The ETag of your last read: without it (or empty) 428, and 412 when the "
    "object changed since.",
)
IDEMPOTENCY_KEY = OpenApiParameter(
    "Idempotency-Key",
    {"type": "string", "maxLength": 200},
    OpenApiParameter.HEADER,
    description="A key of your choosing: the first answer is stored and replayed for a retry "
    "with the same key (header `Idempotent-Replayed: true`); the key with another body is a "
    "422, with another path a 409.",
)


def _body_digest(request: Request) -> str:
    """SHA-256 of the request's body, read before the view (413 when it is too big)."""
    try:
        body = request._request.body
    except RequestDataTooBig as exc:
        raise BodyTooLarge(
            f"The request body is larger than {settings.DATA_UPLOAD_MAX_MEMORY_SIZE} bytes."
        ) from exc
    return hashlib.sha256(body).hexdigest()


def idempotent(view: Callable[..., Response]) -> Callable[..., Response]:
    """Honour ``Idempotency-Key``: the first response is stored and replayed for the same
    user, method and path; reusing a key for another request is refused."""

    @functools.wraps(view)
    def wrapper(self: Any, request: Request, *args: Any, **kwargs: Any) -> Response:
        key = request.headers.get("Idempotency-Key", "").strip()
        if not key:
            return view(self, request, *args, **kwargs)
        if len(key) > 200:
            return Response(
                {"detail": "Idempotency-Key is at most 200 characters.", "code": "invalid"},
                status=status.HTTP_400_BAD_REQUEST,
            )
        digest = _body_digest(request)
        existing = IdempotencyRecord.objects.filter(user_id=user_id(request.user), key=key).first()
        if existing is not None:
            if existing.body_digest and existing.body_digest != digest:
                return Response(  # the key names one request: another body is a mistake
                    {
                        "detail": "This Idempotency-Key was used with another body: use a new "
                        "key for a new request.",
                        "code": "idempotency_key_reused",
                    },
                    status=status.HTTP_422_UNPROCESSABLE_ENTITY,
                )
            if (existing.method, existing.path) != (request.method, request.path):
                return Response(
                    {
                        "detail": "This Idempotency-Key was used for another request.",
                        "code": "idempotency_key_reused",
                    },
                    status=status.HTTP_409_CONFLICT,
                )
            if existing.status == 0:
                return Response(
                    {
                        "detail": "A request with this Idempotency-Key is still running.",
                        "code": "idempotency_in_progress",
                    },
                    status=status.HTTP_409_CONFLICT,
                )
            replay = Response(existing.body, status=existing.status)
            replay["Idempotent-Replayed"] = "true"
            return replay
        try:
            with transaction.atomic():
                record = IdempotencyRecord.objects.create(
                    user_id=user_id(request.user),
                    key=key,
                    method=request.method or "",
                    path=request.path,
                    body_digest=digest,
                )
        except IntegrityError:
            return Response(
                {
                    "detail": "A request with this Idempotency-Key is still running.",
                    "code": "idempotency_in_progress",
                },
                status=status.HTTP_409_CONFLICT,
            )
        try:
            response = view(self, request, *args, **kwargs)
        except Exception:
            record.delete()
            raise
        if 200 <= response.status_code < 300:
            IdempotencyRecord.objects.filter(pk=record.pk).update(
                status=response.status_code, body=response.data
            )
        else:
            record.delete()  # a refused request may be retried with the same key
        return response

    return wrapper


def etag_of(*parts: object) -> str:
    return '"' + hashlib.sha256("|".join(str(p) for p in parts).encode()).hexdigest()[:20] + '"'


@contextmanager
def guarded_write(
    request: Request, queryset: QuerySet[M], pk: Any, etag: Callable[[M], str]
) -> Iterator[tuple[M, Response | None]]:
    """The object read again under its row lock, in a transaction kept for the write, and
    the 412 its ``If-Match`` earns (None: go ahead). Of concurrent writers sending the same
    ``If-Match`` exactly one gets through: the others wait for the lock, then find the
    version changed. The API view's entry point: the transaction is the outermost (the
    services it wraps nest inside it)."""
    with transaction.atomic(durable=True):
        current = queryset.select_for_update(of=("self",)).get(pk=pk)
        yield current, check_if_match(request, etag(current))


def check_if_match(request: Request, current: str) -> Response | None:
    """412 when ``If-Match`` names another version than the current one."""
    wanted = request.headers.get("If-Match")
    if wanted and wanted.strip() != "*" and current not in [w.strip() for w in wanted.split(",")]:
        return Response(
            {
                "detail": "The object changed since you read it (If-Match does not match); "
                "read it again.",
                "code": "precondition_failed",
            },
            status=status.HTTP_412_PRECONDITION_FAILED,
        )
    return None


class BoundedList(serializers.ListField):  # type: ignore[type-arg]
    """A list whose cost grows with its length (node names, kinds, priority classes):
    deduplicated and refused with a field error before its items are validated when it
    holds more than ``most()`` distinct items (``most``: what could ever be meant, e.g. the
    fleet's node count), so a body of 60,000 names is a 400 in milliseconds. A short list
    (``checked``: at most that many) is left to the service, which says which name is
    wrong."""

    def __init__(
        self, *, most: Callable[[], int], noun: str, checked: int = 0, **kwargs: Any
    ) -> None:
        self.most, self.noun, self.checked = most, noun, checked
        super().__init__(**kwargs)

    def to_internal_value(self, data: Any) -> list[Any]:
        if isinstance(data, list) and all(isinstance(item, str) for item in data):
            data = list(dict.fromkeys(data))
            most = self.most() if len(data) > self.checked else len(data)
            if len(data) > most:
                raise serializers.ValidationError(
                    [f"{len(data)} {self.noun}s, but there are at most {most}: name each once."]
                )
        return super().to_internal_value(data)  # type: ignore[no-any-return]


class StrictInput:
    """Mixin for input serializers: unknown fields are an error, not silently dropped, and
    text is a JSON string (DRF would take ``0`` for ``"0"``; the schema says string)."""

    def to_internal_value(self, data: Any) -> Any:
        if hasattr(data, "keys"):
            fields = self.fields  # type: ignore[attr-defined]
            errors: dict[str, Any] = {name: ["Unknown field."] for name in set(data) - set(fields)}
            for name, field in fields.items():
                if name in data and (problem := not_text(field, data[name])) is not None:
                    errors[name] = problem
            if errors:
                raise serializers.ValidationError(dict(sorted(errors.items())))
        return super().to_internal_value(data)  # type: ignore[misc]


NOT_TEXT = "Not a valid string."
NOT_BOOLEAN = "Must be true or false."
NOT_INTEGER = "A valid integer is required."


def not_text(field: serializers.Field[Any, Any, Any, Any], value: Any) -> Any:
    """The error of a value whose JSON type is not the one ``field`` takes (a string for
    text, itself or as the items of a list or the values of a map; true or false; an
    integer); None when it is fine (or another field's business: a list that is no list is
    the list field's own error)."""
    if value is None:
        return None  # the field's own allow_null decides
    if isinstance(field, serializers.CharField):
        return None if isinstance(value, str) else [NOT_TEXT]
    if isinstance(field, serializers.BooleanField):
        return None if isinstance(value, bool) else [NOT_BOOLEAN]
    if isinstance(field, serializers.IntegerField):
        return None if isinstance(value, int) and not isinstance(value, bool) else [NOT_INTEGER]
    if isinstance(field, serializers.ListField) and isinstance(value, list):
        items = {i: e for i, item in enumerate(value) if (e := not_text(field.child, item))}
        return items or None
    if isinstance(field, serializers.DictField) and isinstance(value, dict):
        values = {k: e for k, item in value.items() if (e := not_text(field.child, item))}
        return values or None
    return None


def repeated_or_empty(params: Any, names: Any) -> dict[str, list[str]]:
    """The query parameters among ``names`` sent twice or empty: a parameter you send takes
    one value (``?team=`` is no "every team": leave it out)."""
    errors = {}
    for name in names:
        values = params.getlist(name)
        if len(values) > 1:
            errors[name] = ["Give one value."]
        elif values == [""]:
            errors[name] = [f"Give a value, or leave {name} out."]
    return errors


class StrictQuery(serializers.Serializer[Any]):
    """A serializer of query parameters: each sent once and with a value (DRF would read an
    empty optional one as absent, and the last of repeated ones)."""

    def to_internal_value(self, data: Any) -> Any:
        if hasattr(data, "getlist"):
            errors = repeated_or_empty(data, self.fields)
            if errors:
                raise serializers.ValidationError(errors)
        return super().to_internal_value(data)
