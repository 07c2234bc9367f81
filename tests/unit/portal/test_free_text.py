"""Free text may not hold terminal controls or bidi overrides (portal/vocabulary/text.py):
refused with the field's name wherever it enters, a JSON body's field, a form's field or a
query parameter; line breaks, tabs and right-to-left text stay text."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from changes.models import QuotaChangeRequest
from portal.vocabulary.text import neutralised, text_problem

pytestmark = pytest.mark.django_db

TROJAN = "approve this \u202egnp.exe\u202c please"
ESCAPE = "reason \x1b[2J\x1b]8;;https://evil.example\x07click\x1b]8;;\x07"


def test_what_free_text_may_hold() -> None:
    assert text_problem("two lines\nand\ta tab, \u05e9\u05dc\u05d5\u05dd \u200f(RLM)") == ""
    assert text_problem(TROJAN) == (
        "Control characters and bidi overrides are not allowed (U+202C, U+202E)."
    )
    assert text_problem(ESCAPE) == (
        "Control characters and bidi overrides are not allowed (U+0007, U+001B)."
    )
    assert text_problem("isolate \u2066x\u2069 and C1 \x9b") != ""
    assert neutralised(TROJAN) == "approve this gnp.exe please"


def test_a_json_body_is_refused_field_by_field(client: Client, team_a_admin: Any) -> None:
    client.force_login(team_a_admin)
    answer = client.post(
        "/api/v1/quota-requests/",
        {"team": "team-a", "reason": TROJAN, "extra": {"notes": [ESCAPE]}},
        content_type="application/json",
    )
    assert answer.status_code == 400
    assert answer.json()["errors"] == {
        "extra.notes.0": [
            "Control characters and bidi overrides are not allowed (U+0007, U+001B)."
        ],
        "reason": ["Control characters and bidi overrides are not allowed (U+202C, U+202E)."],
    }
    assert not QuotaChangeRequest.objects.exists()


def test_a_form_field_or_a_query_parameter_is_refused_before_any_view(
    client: Client, team_a_admin: Any
) -> None:
    client.force_login(team_a_admin)
    page = client.post("/quota/new/", {"reason": ESCAPE, "requested": "4"})
    assert page.status_code == 400
    assert page.content.decode() == (
        "Invalid input. reason: Control characters and bidi overrides are not allowed "
        "(U+0007, U+001B)."
    )
    listed = client.get("/api/v1/quota-requests/", {"search": TROJAN})
    assert listed.status_code == 400
    assert list(listed.json()["errors"]) == ["search"]
    assert client.get("/api/v1/quota-requests/", {"search": "a\tb"}).status_code != 400
