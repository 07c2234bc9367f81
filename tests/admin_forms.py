"""Driving the real Django admin in tests: a change form's data as the page holds it (the
object's fields and every inline's rows), to change a value and POST it back, as a person
editing the page does; and the audit rows a post wrote."""

from __future__ import annotations

import re
from typing import Any

from django.test import Client

from portal.models import AuditEvent


def form_data(client: Client, url: str) -> dict[str, Any]:
    """What the change (or add) form at ``url`` would post unchanged."""
    page = client.get(url)
    assert page.status_code == 200, url
    data: dict[str, Any] = {}
    _put(data, page.context["adminform"].form)
    for inline in page.context["inline_admin_formsets"]:
        formset = inline.formset
        _put(data, formset.management_form)
        for form in formset.forms:
            _put(data, form)
    return data


def _put(data: dict[str, Any], form: Any) -> None:
    for name in form.fields:
        value = form[name].value()
        if value is None or value is False:
            continue
        key = form.add_prefix(name)
        if value is True:
            data[key] = "on"
        elif isinstance(value, list | tuple):
            data[key] = [str(v) for v in value]
        else:
            data[key] = str(value)


def inline_row(data: dict[str, Any], prefix: str, field: str, value: str) -> str | None:
    """The form prefix (``quota_items-1``) of the inline row whose ``field`` is ``value``."""
    for key, held in data.items():
        found = re.fullmatch(rf"({re.escape(prefix)}-\d+)-{re.escape(field)}", key)
        if found and held == value:
            return found.group(1)
    return None


def page_text(response: Any) -> str:
    """The page's text as a person reads it (tags dropped, entities of quotes undone)."""
    body = response.content.decode()
    body = re.sub(r"<[^>]+>", " ", body).replace("&#x27;", "'").replace("&quot;", '"')
    return re.sub(r"\s+", " ", body)


def change_url(obj: Any) -> str:
    return f"/admin/{obj._meta.app_label}/{obj._meta.model_name}/{obj.pk}/change/"


def last_audit() -> int:
    """The newest audit row's id (0: none), to read what a post wrote after it."""
    return AuditEvent.objects.order_by("-pk").values_list("pk", flat=True).first() or 0


def audited_since(last: int) -> list[tuple[str, str, str]]:
    """(event, actor, source) of each audit row written after ``last``, oldest first."""
    return [
        (e.event, e.actor_name, e.source)
        for e in AuditEvent.objects.filter(pk__gt=last).order_by("pk")
    ]


def edit_writes_one_row(client: Client, obj: Any, changes: dict[str, str], event: str) -> None:
    """Post ``obj``'s change form with ``changes``: saved, one ``event`` row naming the
    admin (source admin), the changes stored."""
    data = form_data(client, change_url(obj))
    before = last_audit()
    saved = client.post(change_url(obj), {**data, **changes})
    assert saved.status_code == 302, page_text(saved)[-1500:]
    assert audited_since(before) == [(event, "admin", "admin")]
    obj.refresh_from_db()
    assert all(str(getattr(obj, k)) == v for k, v in changes.items())
