"""The audit log as people read it: one row per event for the Audit page and its CSV, built
from the stored event alone (no query per row)."""

from __future__ import annotations

import csv
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from django.urls import NoReverseMatch, reverse

from portal.audit.text import (
    Change,
    Link,
    audit_changes,
    cause_link,
    cause_text,
    changes_text,
    event_label,
    target_link,
)
from portal.models import AuditEvent
from portal.vocabulary.names import CLUSTER_UNKNOWN, PodNames

CSV_COLUMNS = (
    "time",
    "actor",
    "event",
    "event_label",
    "target_type",
    "target_id",
    "target",
    "team",
    "source",
    "request_id",
    "changes",
    "old",
    "new",
    "cause",
)
# The changes a row shows at once; the rest (a creation lists every field) fold away.
SHOWN_CHANGES = 6
# A spreadsheet runs a cell starting with one of these as a formula.
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


@dataclass(frozen=True)
class AuditRow:
    """One event with its human label, its per-field changes and its object's page."""

    event: AuditEvent
    label: str
    changes: list[Change]
    target_url: str
    cause: str = ""  # the request the row's write carried out, as people name it
    cause_url: str = ""

    @property
    def shown_changes(self) -> list[Change]:
        return self.changes[:SHOWN_CHANGES]

    @property
    def folded_changes(self) -> list[Change]:
        return self.changes[SHOWN_CHANGES:]


def audit_row(event: AuditEvent, names: PodNames) -> AuditRow:
    """The row as ``names`` lets its reader see it: other teams' pods counted, not named."""
    old, new = redacted_values(event, names)
    return AuditRow(
        event=event,
        label=event_label(event.event),
        changes=audit_changes(event.event, old, new),
        target_url=target_url(event),
        cause=cause_text(event.cause),
        cause_url=_url(cause_link(event.cause)),
    )


def redacted_values(event: AuditEvent, names: PodNames) -> tuple[Any, Any]:
    """The event's old and new values as ``names`` lets its reader see them. An audit event
    records no cluster (its values are whatever its writer kept): a namespace is named where
    the reader's teams own one of that name on some cluster (``CLUSTER_UNKNOWN``)."""
    return (
        names.redact_value(event.old, CLUSTER_UNKNOWN),
        names.redact_value(event.new, CLUSTER_UNKNOWN),
    )


def target_url(event: AuditEvent) -> str:
    """The page of the event's object ("" when it has none)."""
    return _url(target_link(event.target_type, event.target_id))


def _url(link: Link | None) -> str:
    if link is None:
        return ""
    try:
        url = reverse(link.url_name, args=link.args)
    except NoReverseMatch:
        return ""
    return f"{url}#{link.fragment}" if link.fragment else url


def csv_record(event: AuditEvent, names: PodNames) -> list[str]:
    """The event's cells in :data:`CSV_COLUMNS` order: the readable changes for people, the
    recorded old/new JSON for machines (other teams' pods counted, not named)."""
    old, new = redacted_values(event, names)
    cells = [
        event.time.isoformat(),
        event.actor_name or "system",
        event.event,
        event_label(event.event),
        event.target_type,
        event.target_id,
        event.target_repr,
        event.team.slug if event.team is not None else event.team_name,
        event.source,
        event.request_id,
        changes_text(audit_changes(event.event, old, new)),
        _json(old),
        _json(new),
        event.cause,
    ]
    return [_safe_cell(cell) for cell in cells]


def csv_lines(events: Iterable[AuditEvent], names: PodNames) -> Iterator[str]:
    """The header, then one CSV line per event, produced as the events are read."""
    buffer = _LineBuffer()
    writer = csv.writer(buffer)
    yield writer.writerow(CSV_COLUMNS)
    for event in events:
        yield writer.writerow(csv_record(event, names))


class _LineBuffer:
    """A file-like object whose ``write`` returns the line, for a streamed CSV."""

    def write(self, value: str) -> str:
        return value


def _json(value: object) -> str:
    return "" if value is None else json.dumps(value, sort_keys=True, ensure_ascii=False)


def _safe_cell(value: str) -> str:
    return f"'{value}" if value.startswith(FORMULA_STARTS) else value
