"""``{% load waits %}``: ``{% why_box why team %}`` and ``{% estimate_box estimate %}`` are
``components/why.html`` and ``components/estimate.html``, each drawn once per distinct
explanation or estimate in a page and then repeated (the pods of one Job wait for one
reason: twenty of them were drawn twenty times, a third of the home's rendering)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any
from urllib.parse import urlencode

from django import template
from django.template.context import Context
from django.utils.safestring import SafeString

from diagnostics.estimate import Estimate
from diagnostics.explain import Explanation

register = template.Library()


def _drawn(context: Context, name: str, key: tuple[Any, ...], values: dict[str, Any]) -> SafeString:
    """The component ``name`` rendered with ``values``, once per ``key`` in this page."""
    store: Any = context.render_context
    memo: dict[tuple[Any, ...], str] = store.setdefault(f"{__name__}.drawn", {})
    if key not in memo:
        component = context.template.engine.get_template(name)  # type: ignore[union-attr]
        memo[key] = component.render(context.new(values))  # escaped by the component
    return SafeString(memo[key])


ASK_QUOTA = "/quota/new/"  # the explainers' link to the quota request form


@register.simple_tag(takes_context=True)
def why_box(
    context: Context, why: Explanation, team: Any = None, namespace: Any = None
) -> SafeString:
    """Why it waits (``team.may_ask``: whether the action to ask for a change is offered).
    Next to a ``namespace`` (of ``team``), asking for quota opens the form on that namespace
    of its cluster."""
    may_ask = bool(getattr(team, "may_ask", False))
    if why.action and why.action.get("url") == ASK_QUOTA and namespace is not None:
        why = replace(why, action={**why.action, "url": ask_quota_url(team, namespace)})
    key = ("why", *why.key(), may_ask)
    return _drawn(context, "components/why.html", key, {"why": why, "team": {"may_ask": may_ask}})


def ask_quota_url(team: Any, namespace: Any) -> str:
    """The quota request form, filled in with ``namespace`` of ``team`` on its cluster."""
    query = {"team": team.slug, "namespace": namespace.name, "cluster": namespace.cluster.name}
    return f"{ASK_QUOTA}?{urlencode(query)}"


@register.simple_tag(takes_context=True)
def estimate_box(context: Context, estimate: Estimate | None) -> SafeString:
    """When it could start (nothing without an estimate)."""
    if estimate is None:
        return SafeString("")
    return _drawn(
        context, "components/estimate.html", ("estimate", estimate), {"estimate": estimate}
    )
