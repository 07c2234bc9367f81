"""``{% load home %}``: a namespace's quota and limits tables, its running GPU work, its waiting
workloads and its pending pods on the home, and a team's priority classes, each drawn once per
what it shows.

Between two polls a namespace's tables and lists show what they showed before: each item's
resource, hard limit and use, the LimitRange's items, what runs and since when, the workloads
and pods that wait and what their cards say. The HTML is kept in this process under those
values (``portal.infra.process_cache``; the warnings, bars, units, links and times are pure
functions of them, the times with the time zone, today and, for "ago", the text it reads)."""

from __future__ import annotations

from typing import Any

from django import template
from django.template.loader import render_to_string
from django.utils import timezone
from django.utils.safestring import SafeString, mark_safe

from portal.infra.process_cache import ProcessCache
from portal.templatetags.qm import ago

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


def _today() -> tuple[str, Any]:
    """What a time is written against (``when``): the time zone and today in it."""
    return timezone.get_current_timezone_name(), timezone.localdate()


@register.simple_tag
def running_work(ns: Any, on_cluster: Any, several: bool) -> SafeString:
    """The namespace's running GPU work (``ns.observed``'s ``running``:
    ``overview.home.Running``), newest first, each with where it runs (links to the nodes
    name the cluster when the user has ``several``). Kept under each item's every value and
    how long ago it started, as written now."""
    items = ns.observed["running"]
    if not items:
        return mark_safe("")
    key = (
        *("running", ns.pk, ns.name, getattr(on_cluster, "name", ""), bool(several)),
        *_today(),
        tuple(
            (
                *(r.kind, r.name, r.new, tuple(sorted(r.holds.items())), r.claims, r.queue),
                *(r.since, ago(r.since) if r.since else "", tuple(r.nodes), r.pods),
            )
            for r in items
        ),
    )
    context = {"ns": ns, "on_cluster": on_cluster, "several": several}
    return _kept(key, "overview/home.html#running-work", context)


@register.simple_tag
def waiting_workloads(ns: Any, team: Any, on_cluster: Any) -> SafeString:
    """The namespace's waiting workloads (``ns.observed``'s ``workloads``), each with when it
    could start and why it waits, as redacted for the user (``diagnostics.selectors``), and
    what its card offers the user (asking for quota, on this namespace of its cluster)."""
    workloads = ns.observed["workloads"]
    if not workloads:
        return mark_safe("")
    cluster = getattr(ns.cluster, "name", "")
    key = (
        *("workloads", ns.name, cluster, getattr(on_cluster, "name", "")),
        *(team.slug, bool(getattr(team, "may_ask", False)), *_today()),
        tuple(
            (
                *(w.pk, w.name, w.queue_name, w.admitted, w.evictions, w.estimate),
                None if w.why is None else w.why.key(),
            )
            for w in workloads
        ),
    )
    context = {"ns": ns, "team": team, "on_cluster": on_cluster}
    return _kept(key, "overview/home.html#waiting-workloads", context)


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
        *_today(),
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
