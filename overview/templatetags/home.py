"""``{% load home %}``: a namespace's quota and limits tables and its pending pods on the home,
and a team's priority classes, each drawn once per what it shows.

Between two polls a namespace's tables and pending pods show what they showed before: each
item's resource, hard limit and use, the LimitRange's items, the pods and what their cards
say. The HTML is kept in this process under those values (``portal.infra.process_cache``; the
warnings, bars and units are pure functions of them)."""

from __future__ import annotations

from typing import Any

from django import template
from django.template.loader import render_to_string
from django.utils import timezone
from django.utils.safestring import SafeString, mark_safe

from portal.infra.process_cache import ProcessCache

register = template.Library()

_DRAWN: ProcessCache[tuple[Any, ...], str] = ProcessCache("home tables")


def _key(kind: str, ns: Any) -> tuple[Any, ...]:
    """Everything the table of ``kind`` is drawn from."""
    if kind == "quota":
        items = ns.quota_items.all()
        return (kind, tuple((i.resource, i.hard, i.used, i.fill, i.over) for i in items))
    if kind == "limits":
        fields = ("limit_type", "resource", "default", "default_request", "max", "min")
        items = ns.limit_items.all()
        return (kind, ns.name, tuple(tuple(getattr(i, f) for f in fields) for i in items))
    raise template.TemplateSyntaxError(f"namespace_table: no table {kind!r}")


@register.simple_tag
def namespace_table(kind: str, ns: Any) -> SafeString:
    """The namespace's ``quota`` table (each item used of hard, with ``used``, ``fill`` and
    ``over`` set by the home) or its ``limits`` table."""
    return _kept(_key(kind, ns), f"overview/home.html#{kind}-table", {"ns": ns})


@register.simple_tag
def pending_pods(ns: Any, team: Any) -> SafeString:
    """The namespace's pending pods, one card for those that wait alike (``ns.observed``'s
    ``pods``: ``overview.home.PodsAlike``), with why and the estimated wait. Kept under the
    pods, what each card says and when it could start (its times written against the time
    zone and today), and what the card offers the user (asking for quota, on this
    namespace of its cluster)."""
    groups = ns.observed["pods"]
    if not groups:
        return mark_safe("")
    cluster = getattr(ns.cluster, "name", "")
    key = (
        *("pods", ns.name, cluster, team.slug, bool(getattr(team, "may_ask", False))),
        *(timezone.get_current_timezone_name(), timezone.localdate()),
        tuple((tuple((p.pk, p.name) for p in g.pods), g.why.key(), g.estimate) for g in groups),
    )
    return _kept(key, "overview/home.html#pending-pods", {"ns": ns, "team": team})


@register.simple_tag
def priority_classes(team: Any) -> SafeString:
    """The priority classes the team may use, each with its value, highest first."""
    classes = tuple((pc.name, pc.value) for pc in team.allowed_priority_classes.all())
    key = ("priority-classes", classes)
    return _kept(key, "overview/home.html#priority-classes", {"classes": classes})


def _kept(key: tuple[Any, ...], partial: str, context: dict[str, Any]) -> SafeString:
    """The partial drawn with ``context``, once per ``key`` in this process."""
    html = _DRAWN.get(key, lambda: render_to_string(partial, context))
    return mark_safe(html)  # the template's own output, escaped as it was drawn
