"""Audit events are an enum with their labels beside them: every event has a label, the
pages read it, and no product module records an event spelled as a bare string."""

from __future__ import annotations

import ast

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.utils.html import escape

from portal.audit.events import Event, admin_event
from portal.audit.text import EVENT_LABELS, event_label
from tests.unit.test_architecture import product_files

# Calls that record an audit event (the audit row's ``event``).
RECORDERS = {"record_audit", "save_validated"}


def test_every_event_has_a_label_the_pages_show() -> None:
    assert len(Event) >= 56
    for event in Event:
        assert event.label.strip(), event
        assert event_label(event.value) == event.label == EVENT_LABELS[event.value]
    assert len({event.label for event in Event}) == len(Event)  # none reads as another


def test_an_admin_edit_is_labelled_by_its_models_noun() -> None:
    assert event_label(admin_event("clusterqueue", "changed")) == "ClusterQueue changed"


def _spelled(value: ast.expr) -> list[str]:
    """The bare strings an ``event=`` value may be (either side of a conditional too)."""
    if isinstance(value, ast.IfExp):
        return _spelled(value.body) + _spelled(value.orelse)
    if isinstance(value, ast.Constant) and isinstance(value.value, str):
        return [value.value]
    if isinstance(value, ast.JoinedStr):
        return [ast.unparse(value)]
    return []


def literal_events(tree: ast.AST) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        name = getattr(node.func, "id", None) or getattr(node.func, "attr", None)
        for keyword in node.keywords:
            if name in RECORDERS and keyword.arg == "event":
                found += [(node.lineno, text) for text in _spelled(keyword.value)]
    return found


def test_no_product_module_records_an_event_spelled_as_a_string() -> None:
    spelled = {
        f"{path.name}:{line}": text
        for path in product_files()
        for line, text in literal_events(ast.parse(path.read_text()))
    }
    assert spelled == {}


@pytest.mark.parametrize(
    "source",
    [
        'record_audit(actor=a, event="team.created", source="cli")',
        'record_audit(actor=a, event=Event.TEAM_CREATED if x else "team.changed", source="cli")',
        'save_validated(row, actor=a, source="cli", event=f"{noun}.saved")',
    ],
)
def test_a_spelled_event_would_be_found(source: str) -> None:
    assert literal_events(ast.parse(source))


def test_the_audit_pages_filter_suggests_every_event_with_its_label(demo: None) -> None:
    client = Client()
    client.force_login(User.objects.get(username="admin"))
    page = client.get("/audit/").content.decode()
    for event in Event:
        assert f'<option value="{event.value}">{escape(event.label)}</option>' in page
