"""Pure renderers: tenant models -> Kubernetes objects (dicts). No I/O, no queries.

Callers pass everything a renderer needs; related objects are never fetched here.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from portal.vocabulary.labels import managed_labels
from tenants.models import LimitRangeItem, Namespace, PriorityClass, QuotaItem

CORE_V1 = "v1"
SCHEDULING_V1 = "scheduling.k8s.io/v1"
VOLCANO_QUEUE_ANNOTATION = "scheduling.volcano.sh/queue-name"

Manifest = dict[str, Any]


def render_namespace(namespace: Namespace, *, team_slug: str, volcano_queue: str = "") -> Manifest:
    """A Namespace labelled with its team; with Volcano, annotated with its default queue."""
    metadata: dict[str, Any] = {"name": namespace.name, "labels": managed_labels(team_slug)}
    if volcano_queue:
        metadata["annotations"] = {VOLCANO_QUEUE_ANNOTATION: volcano_queue}
    return {"apiVersion": CORE_V1, "kind": "Namespace", "metadata": metadata}


def render_resource_quota(
    namespace: Namespace, items: Iterable[QuotaItem], *, team_slug: str
) -> Manifest | None:
    """The namespace's ResourceQuota, or None when it has no quota items."""
    hard = {item.resource: item.hard for item in sorted(items, key=lambda i: i.resource)}
    if not hard:
        return None
    return {
        "apiVersion": CORE_V1,
        "kind": "ResourceQuota",
        "metadata": {
            "name": namespace.quota_name,
            "namespace": namespace.name,
            "labels": managed_labels(team_slug),
        },
        "spec": {"hard": hard},
    }


_LIMIT_KEYS = (
    ("default", "default"),
    ("default_request", "defaultRequest"),
    ("max", "max"),
    ("min", "min"),
)


def render_limit_range(
    namespace: Namespace, items: Iterable[LimitRangeItem], *, team_slug: str
) -> Manifest | None:
    """The namespace's LimitRange (one entry per type), or None when it has no items."""
    by_type: dict[str, dict[str, dict[str, str]]] = {}
    for item in sorted(items, key=lambda i: (i.limit_type, i.resource)):
        entry = by_type.setdefault(item.limit_type, {})
        for attr, key in _LIMIT_KEYS:
            value = getattr(item, attr)
            if value:
                entry.setdefault(key, {})[item.resource] = value
    if not by_type:
        return None
    limits = []
    for limit_type in sorted(by_type):
        entry = by_type[limit_type]
        limits.append(
            {key: entry[key] for _, key in _LIMIT_KEYS if key in entry} | {"type": limit_type}
        )
    return {
        "apiVersion": CORE_V1,
        "kind": "LimitRange",
        "metadata": {
            "name": namespace.limit_range_name,
            "namespace": namespace.name,
            "labels": managed_labels(team_slug),
        },
        "spec": {"limits": limits},
    }


def render_priority_class(priority_class: PriorityClass) -> Manifest:
    manifest: Manifest = {
        "apiVersion": SCHEDULING_V1,
        "kind": "PriorityClass",
        "metadata": {"name": priority_class.name, "labels": managed_labels()},
        "value": priority_class.value,
        "preemptionPolicy": priority_class.preemption_policy,
    }
    # The API server never stores `globalDefault: false` (omitempty): rendering it would be
    # a difference forever, and a field another server-side applier could conflict on.
    if priority_class.global_default:
        manifest["globalDefault"] = True
    if priority_class.description:
        manifest["description"] = priority_class.description
    return manifest
