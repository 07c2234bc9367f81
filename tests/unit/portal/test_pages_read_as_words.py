"""Every page, walked as a team lead, an approver and an admin, reads as words: no raw enum
or state code (``breaks_quota``, ``in_progress``), no ISO timestamp, no bare ``None``,
``False`` or ``True`` shown as a value, never Django's debug page. Only the visible text is
read (tags, scripts and attribute values are not); text inside ``<code>`` is a name the
person types or greps for (an event, a label, a resource) and is left out. The CSV exports
carry no ``None``, ``False``, ``True`` or ISO timestamp either."""

from __future__ import annotations

import csv
import io
import re
from html.parser import HTMLParser
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from tests.unit.portal.test_forms_answer import walked_pages
from tests.unit.portal.test_page_permissions import objects
from usage import reports

pytestmark = pytest.mark.django_db

__all__ = ["objects"]  # the permission matrix's objects (a MIG change, a drain, a quota request)

WALKERS = ("lead-a", "approver", "admin")
HIDDEN_TEXT = {"script", "style", "code", "pre", "kbd", "samp", "textarea", "template"}
ISO = re.compile(r"\b\d{4}-\d{2}-\d{2}T\d{2}:\d{2}|[+-]00:00\b")
# Kueue's stopPolicy value "None" is shown with its meaning, "None (admitting)": not bare.
BARE = re.compile(r"(?<![\w.-])(None|False|True)(?![\w.-]| \()")
CODE = re.compile(r"(?<![\w./:-])[a-z][a-z0-9]*(?:_[a-z0-9]+)+(?![\w/-])")
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
    def __init__(self) -> None:
        super().__init__()
        self.parts: list[str] = []
        self.hidden = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in HIDDEN_TEXT:
            self.hidden += 1

    def handle_endtag(self, tag: str) -> None:
        if tag in HIDDEN_TEXT and self.hidden:
            self.hidden -= 1

    def handle_data(self, data: str) -> None:
        if not self.hidden:
            self.parts.append(data)


def visible_text(html: str) -> str:
    parser = _Text()
    parser.feed(html)
    return " ".join(" ".join(parser.parts).split())


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
    assert not problems, "\n".join(sorted(set(problems)))


def test_every_export_reads_as_words(objects: dict[str, int]) -> None:
    client = Client()
    client.force_login(User.objects.get(username="admin"))
    problems: list[str] = []
    for url in [f"/reports/{name}.csv" for name in reports.REPORTS] + ["/audit/events.csv"]:
        response: Any = client.get(url)
        assert response.status_code == 200, url
        body = b"".join(response.streaming_content) if response.streaming else response.content
        header, *rows = list(csv.reader(io.StringIO(body.decode()))) or [[]]
        for row in rows:
            for column, cell in zip(header, row, strict=False):
                if (url, column) in ALLOWED_COLUMNS:
                    continue
                if cell in {"None", "False", "True"} or ISO.search(cell):
                    problems.append(f"{url} {column}: {cell!r}")
    assert not problems, "\n".join(sorted(set(problems))[:60])
