"""Driving the real Django admin in tests: a change form's data as the page holds it (the
object's fields and every inline's rows), to change a value and POST it back, as a person
editing the page does."""

from __future__ import annotations

import re
from typing import Any

from django.test import Client


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
