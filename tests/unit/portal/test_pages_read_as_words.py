"""Every page, walked as a team lead, an approver and an admin, reads as words: no raw enum
or state code (``breaks_quota``, ``in_progress``), no ISO timestamp, no bare ``None``,
``False`` or ``True`` shown as a value, never Django's debug page. Only the visible text is
read (tags, scripts and attribute values are not); text inside ``<code>`` is a name the
person types or greps for (a label, a resource) and is left out, but an audit event's code
is never shown, not even as code: people read its label (the code stays in a tooltip, the
filter and the API). Kueue's "no limit" reads as words, never "none"; every button or
button-link that cancels, aborts, rolls back, removes, revokes, rejects or deletes is styled
as destructive. The CSV exports carry no ``None``, ``False``, ``True``, ``nan``, ISO
timestamp or whole number written as a fraction (``20.0``) either."""

from __future__ import annotations

import csv
import datetime as dt
import io
import re
from html.parser import HTMLParser
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone

from cluster.services import settings_cluster
from portal.audit.events import Event
from tests.unit.portal.test_forms_answer import walked_pages
from tests.unit.portal.test_page_permissions import objects, objects_snapshot
from usage import reports
from usage.models import Rollup, Sample, WorkloadRecord

pytestmark = pytest.mark.django_db

__all__ = [
    "objects",
    "objects_snapshot",
]  # the permission matrix's objects (a MIG change, a drain, a quota request)

WALKERS = ("lead-a", "approver", "admin")
HIDDEN_TEXT = {"script", "style", "code", "pre", "kbd", "samp", "textarea", "template"}
ISO = re.compile(r"\b\d{4}-\d{2}-\d{2}T\d{2}:\d{2}|[+-]00:00\b")
# Kueue's stopPolicy value "None" is shown with its meaning, "None (admitting)": not bare.
BARE = re.compile(r"(?<![\w.-])(None|False|True)(?![\w.-]| \()")
CODE = re.compile(r"(?<![\w./:-])[a-z][a-z0-9]*(?:_[a-z0-9]+)+(?![\w/-])")
WHOLE_AS_FRACTION = re.compile(r"-?\d+\.0+")
EVENT_CODES = {str(event) for event in Event}
EVENT_CODE = re.compile(r"(?<![\w./-])[a-z][a-z_]*\.[a-z][a-z_.]*(?![\w/-])")
# Kueue's absent borrowing or lending limit is "no limit" (unlimited; lend all of it).
NO_LIMIT_AS_NONE = re.compile(r"(?i)\b(?:borrowing|lending) limit\W{0,3}(?:none|null|-1)\b")
DESTRUCTIVE = re.compile(
    r"^(?:cancel|abort|roll back|remove|revoke|reject|delete|offboard|return .*to service)",
    re.I,
)
DESTRUCTIVE_CLASSES = {"danger", "destructive"}
# Findings left on purpose: {(page, text found): why}
ALLOWED: dict[tuple[str, str], str] = {}
# Export columns left on purpose: {(export, column): why}
ALLOWED_COLUMNS = {
    ("/audit/events.csv", "time"): "the record's instant, ISO 8601 with its offset: sortable, "
    "unambiguous across zones, what a SIEM or spreadsheet imports",
    ("/audit/events.csv", "old"): "the recorded values as JSON, as the page says",
    ("/audit/events.csv", "new"): "the recorded values as JSON, as the page says",
}


class _Text(HTMLParser):
    def __init__(self, hidden: set[str]) -> None:
        super().__init__()
        self.parts: list[str] = []
        self.hidden_tags = hidden
        self.hidden = 0
        self.action: tuple[set[str], list[str]] | None = None  # a button's classes, words
        self.actions: list[tuple[set[str], str]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in self.hidden_tags:
            self.hidden += 1
        classes = set((dict(attrs).get("class") or "").split())
        if tag == "button" or (tag == "a" and "button" in classes):
            self.action = (classes, [])

    def handle_endtag(self, tag: str) -> None:
        if tag in self.hidden_tags and self.hidden:
            self.hidden -= 1
        if tag in ("button", "a") and self.action is not None:
            classes, words = self.action
            self.actions.append((classes, " ".join(" ".join(words).split())))
            self.action = None

    def handle_data(self, data: str) -> None:
        if self.action is not None:
            self.action[1].append(data)
        if not self.hidden:
            self.parts.append(data)


def visible_text(html: str, hidden: set[str] = HIDDEN_TEXT) -> str:
    parser = _Text(hidden)
    parser.feed(html)
    return " ".join(" ".join(parser.parts).split())


def raw_codes(page: str, html: str) -> list[str]:
    """Audit event codes shown as text (even as code), and Kueue's no limit read as none."""
    text = visible_text(html, HIDDEN_TEXT - {"code", "kbd", "samp"})
    found = [
        f"{page}: event code {m.group(0)!r} in …{text[max(m.start() - 40, 0) : m.end() + 40]}…"
        for m in EVENT_CODE.finditer(text)
        if m.group(0) in EVENT_CODES
    ]
    found += [f"{page}: {m.group(0)!r} (say no limit)" for m in NO_LIMIT_AS_NONE.finditer(text)]
    return found


def plain_destructive_actions(page: str, html: str) -> list[str]:
    """Buttons (and button links) that undo or end something, not styled as destructive."""
    parser = _Text(HIDDEN_TEXT)
    parser.feed(html)
    parser.close()
    return [
        f"{page}: button {words!r} has classes {sorted(classes)}, not danger or destructive"
        for classes, words in parser.actions
        if DESTRUCTIVE.match(words) and not classes & DESTRUCTIVE_CLASSES
    ]


def findings(page: str, text: str) -> list[str]:
    found = []
    for pattern in (ISO, BARE, CODE):
        for match in pattern.finditer(text):
            if (page, match.group(0)) not in ALLOWED:
                start = max(match.start() - 40, 0)
                found.append(f"{page}: {match.group(0)!r} in …{text[start : match.end() + 40]}…")
    return found


def test_every_page_reads_as_words(objects: dict[str, int]) -> None:
    problems: list[str] = []
    pages = [p.format(**objects) for p in walked_pages() if not p.endswith(".csv")]
    pages += [f"/changes/{objects['drain']}/", "/fleet/nodes/?pool=train"]
    for user in WALKERS:
        client = Client(raise_request_exception=False)
        client.force_login(User.objects.get(username=user))
        for page in pages:
            response = client.get(page)
            body = response.content.decode()
            assert "Traceback" not in body and "technical_500" not in body, (user, page)
            assert response.status_code < 500, (user, page, response.status_code)
            if response.status_code != 200 or "html" not in response["Content-Type"]:
                continue
            problems += [f"{user} {p}" for p in findings(page, visible_text(body))]
            problems += [f"{user} {p}" for p in raw_codes(page, body)]
            problems += [f"{user} {p}" for p in plain_destructive_actions(page, body)]
    assert not problems, "\n".join(sorted(set(problems)))


DAY_SECONDS = 86400


def usage_history() -> None:
    """A whole day of usage yesterday for every report (a team, a ClusterQueue, a pool, a
    finished workload), in whole numbers, so that each export has rows to read."""
    cluster = settings_cluster()
    yesterday = timezone.now().replace(hour=0, minute=0, second=0, microsecond=0)
    yesterday -= dt.timedelta(days=1)
    for kind, owner, scope, flavor in (
        (Sample.Kind.TEAM, "team-a", "team-a", ""),
        (Sample.Kind.QUEUE, "cq-train", "ai-platform", "h100-80gb"),
        (Sample.Kind.POOL, "train", "", ""),
    ):
        Rollup.objects.create(
            cluster=cluster,
            period=Rollup.Period.DAY,
            start=yesterday,
            kind=kind,
            owner=owner,
            scope=scope,
            flavor=flavor,
            resource="nvidia.com/gpu",
            covered_seconds=DAY_SECONDS,
            used_seconds=4 * DAY_SECONDS,
            requested_seconds=4 * DAY_SECONDS,
            borrowed_seconds=2 * DAY_SECONDS,
            lent_seconds=0,
            capacity_seconds=8 * DAY_SECONDS,
            gpu_seconds=4 * DAY_SECONDS,
            peak_used=4,
        )
    WorkloadRecord.objects.create(
        cluster=cluster,
        namespace="team-a",
        name="train-1",
        cluster_queue="cq-train",
        created_at=yesterday,
        queued_at=yesterday,
        admitted_at=yesterday + dt.timedelta(seconds=20),
        finished_at=yesterday + dt.timedelta(hours=2),
        gpu_share=4,
    )


def test_every_export_reads_as_words(objects: dict[str, int]) -> None:
    usage_history()
    client = Client()
    client.force_login(User.objects.get(username="admin"))
    problems: list[str] = []
    for url in [f"/reports/{name}.csv" for name in reports.REPORTS] + ["/audit/events.csv"]:
        response: Any = client.get(url)
        assert response.status_code == 200, url
        body = b"".join(response.streaming_content) if response.streaming else response.content
        header, *rows = list(csv.reader(io.StringIO(body.decode()))) or [[]]
        assert rows, f"{url} has no rows to read"
        for row in rows:
            for column, cell in zip(header, row, strict=False):
                if (url, column) in ALLOWED_COLUMNS:
                    continue
                if cell in {"None", "False", "True", "nan", "inf"} or ISO.search(cell):
                    problems.append(f"{url} {column}: {cell!r}")
                elif WHOLE_AS_FRACTION.fullmatch(cell):
                    problems.append(f"{url} {column}: {cell!r} (a whole number)")
    assert not problems, "\n".join(sorted(set(problems))[:60])
