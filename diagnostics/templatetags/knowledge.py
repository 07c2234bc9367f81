"""``{{ key|fault }}``: the fault table's entry for a key (or None)."""

from __future__ import annotations

from django import template

from gpus.knowledge import BY_KEY, Fault

register = template.Library()


@register.filter
def fault(key: str) -> Fault | None:
    return BY_KEY.get(key or "")
