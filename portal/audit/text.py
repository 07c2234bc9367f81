"""What a person reads of an audit row: a label for its event, its ``old``/``new`` values as
per-field changes (``nominalQuota: 24 → 40``), and the page the row's object lives on.

Pure: no Django, no database. The rows' shapes are those the services record (see
``record_audit``): model snapshots (``*.saved``, ``*.changed``, admin edits) are compared
field by field, nested values flattened into readable paths; the events that record facts
about a decision (a comment, a verdict, the requested value) list those facts.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from portal.audit.events import Event

ARROW = "→"
NOT_SET = "not set"
MAX_LIST_ITEMS = 10

# The labels of the events services record (the enum keeps each beside its event).
EVENT_LABELS: dict[str, str] = {event.value: event.label for event in Event}

# The nouns of event names, including the model names the admin's events use
# (``<model_name>.created`` / ``.changed`` / ``.deleted``).
NOUNS: dict[str, str] = {
    "clusterqueue": "ClusterQueue",
    "cluster_queue": "ClusterQueue",
    "localqueue": "LocalQueue",
    "local_queue": "LocalQueue",
    "resourceflavor": "ResourceFlavor",
    "resource_flavor": "ResourceFlavor",
    "priorityclass": "PriorityClass",
    "priority_class": "PriorityClass",
    "quotaitem": "Quota item",
    "limitrangeitem": "Limit item",
    "nodepool": "Node pool",
    "migconfig": "MIG config",
    "price": "GPU price",
    "costpolicy": "Cost policy",
    "cost_policy": "Cost policy",
    "migchangerequest": "MIG change",
    "mig_change": "MIG change",
    "quotachangerequest": "Quota request",
    "quota_change": "Quota request",
    "platformrole": "Platform role",
    "autoapprovalrule": "Auto-approval rule",
    "api_token": "API token",
    "notification_subscription": "Notification subscription",
    "notificationpreference": "Notification preference",
    "notification_preference": "Notification preference",
    "budget": "Budget",
    "budgetextension": "Budget extension",
    "budget_extension": "Budget extension",
}

# Events that record facts about a decision or a step rather than an object's state: a key
# in both old and new is a change, any other key a fact to list.
FACT_EVENTS = (
    "mig_change.",
    "node_drain.",
    "quota_change.",
    "platform_role.",
    "membership.granted",
    "membership.revoked",
    "user.",
    "api_token.",
    "notification_subscription.",
    "notification_preference.",
    "budget.threshold",
    "budget.held",
    "budget.released",
    "budget_extension.",
)

# Field names a person reads instead of the recorded key, per event prefix.
FIELD_NAMES: dict[str, dict[str, str]] = {"quota_change.": {"value": "quota"}}

# Keys of a model snapshot that say nothing to a person (the object is linked by its id).
SKIPPED_FIELDS = frozenset({"id"})

# Keys that name an item of a list of mappings (a LimitRange item is its type and resource).
IDENTITY_KEYS = ("limit_type", "type", "name", "resource")

# Coded values a person reads in words, by the field that holds them (the verdicts of
# ``changes.impact``, Kueue's stop policies, the requests' states).
CODED_VALUES: dict[str, dict[str, str]] = {
    "verdict": {
        "safe": "Safe",
        "needs_drain": "Needs a drain",
        "breaks_quota": "Breaks quota",
        "blocked": "Blocked",
    },
    "stop_policy": {
        "None": "None (admitting)",
        "Hold": "Hold (admit nothing new)",
        "HoldAndDrain": "Hold and drain (also evict admitted)",
    },
    "unit": {"gpu_hours": "GPU-hours", "money": "Money"},
    "period": {"monthly": "Every calendar month (UTC)", "custom": "A custom period"},
    "state": {
        "pending": "Pending approval",
        "rolling_back": "Rolling back",
        "rolled_back": "Rolled back",
    },
}
CODED_VALUES["stopPolicy"] = CODED_VALUES["stop_policy"]

# A moment as services record it (``datetime.isoformat()``).
ISO_MOMENT = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:\d{2})?$")

Kind = Literal["changed", "added", "removed", "fact"]


@dataclass(frozen=True)
class Change:
    """One field of an audit row: changed, added, removed, or a fact of the event."""

    field: str
    kind: Kind
    old: str = ""
    new: str = ""

    @property
    def text(self) -> str:
        field = field_words(self.field)
        if self.kind == "changed":
            return f"{field}: {self.old} {ARROW} {self.new}"
        if self.kind == "added":
            return f"{field}: {self.new} (added)"
        if self.kind == "removed":
            return f"{field}: {self.old} (removed)"
        return f"{field}: {self.new or self.old}"


SNAKE = re.compile(r"[a-z][a-z0-9]*(?:_[a-z0-9]+)+")


def field_words(field: str) -> str:
    """A recorded field's path as words: the portal's own ``stop_policy`` reads "stop policy";
    Kubernetes' names (``nominalQuota``, ``nvidia.com/mig.config``) stay as they are typed."""
    return " / ".join(
        part.replace("_", " ") if SNAKE.fullmatch(part) else part for part in field.split(" / ")
    )


@dataclass(frozen=True)
class Link:
    """Where an audit row's object is shown: a URL name, its arguments and a fragment."""

    url_name: str
    args: tuple[str, ...] = ()
    fragment: str = ""


def event_label(event: str) -> str:
    """The human label of an event; an unknown one reads as its words (``x_y.z`` -> "X y z")."""
    if event in EVENT_LABELS:
        return EVENT_LABELS[event]
    noun, _, rest = event.partition(".")
    words = NOUNS.get(noun) or noun.replace("_", " ").capitalize()
    return " ".join([words, *(part.replace("_", " ") for part in rest.split(".") if part)])


def audit_changes(event: str, old: Any, new: Any) -> list[Change]:
    """The per-field changes of an audit row, in a stable order (old's fields first)."""
    names = next((n for prefix, n in FIELD_NAMES.items() if event.startswith(prefix)), {})
    before = _renamed(flatten(old), names) if old is not None else {}
    after = _renamed(flatten(new), names) if new is not None else {}
    if old is None or new is None:  # a creation, a deletion, or a record of facts
        facts = after if old is None else before
        return [Change(f, "fact", new=v) for f, v in facts.items() if v != NOT_SET]
    facts_event = event.startswith(FACT_EVENTS)
    changes = []
    for field in [*before, *(f for f in after if f not in before)]:
        was, now = before.get(field), after.get(field)
        if (was is None or now is None) and _kueue_limit_of_kept_quota(field, before, after):
            # Kueue's absent borrowing or lending limit is no limit, not a removed value.
            changes.append(Change(field, "changed", was or NO_LIMIT, now or NO_LIMIT))
            continue
        if was is not None and now is not None:
            if was != now:
                changes.append(Change(field, "changed", was, now))
        elif facts_event:
            if (now or was) != NOT_SET:
                changes.append(Change(field, "fact", new=now or was or ""))
        elif now is None:
            changes.append(Change(field, "removed", old=was or ""))
        else:
            changes.append(Change(field, "added", new=now))
    return changes


KUEUE_LIMITS = ("borrowingLimit", "lendingLimit")
NO_LIMIT = "no limit"


def _kueue_limit_of_kept_quota(
    field: str, before: Mapping[str, str], after: Mapping[str, str]
) -> bool:
    """A ClusterQueue's (or Cohort's) borrowing or lending limit set or cleared on a quota
    that is there before and after (its nominal quota recorded on both sides)."""
    where, _, key = field.rpartition(" / ")
    nominal = f"{where} / nominalQuota"
    return key in KUEUE_LIMITS and nominal in before and nominal in after


def changes_text(changes: Iterable[Change]) -> str:
    """The changes on one line, for a CSV cell."""
    return "; ".join(change.text for change in changes)


def _renamed(flat: dict[str, str], names: Mapping[str, str]) -> dict[str, str]:
    return {
        names.get(field, field): value
        for field, value in flat.items()
        if field not in SKIPPED_FIELDS
    }


def flatten(value: Any) -> dict[str, str]:
    """Every leaf of ``value`` by its readable path (segments joined by " / ")."""
    return {" / ".join(path) or "value": text for path, text in _leaves(value, ())}


def _leaves(value: Any, path: tuple[str, ...]) -> Iterable[tuple[tuple[str, ...], str]]:
    if isinstance(value, Mapping) and value:
        for key, item in value.items():
            yield from _leaves(item, (*path, str(key)))
        return
    if _is_resource_groups(value):
        yield from _resource_group_leaves(value)
        return
    named = _named_items(value)
    if named is not None:
        for name, rest in named:
            yield from _leaves(rest, (*path, name))
        return
    worded = ""
    if path and isinstance(value, str):
        worded = CODED_VALUES.get(path[-1], {}).get(value, "")
    yield path, worded or scalar_text(value)


def _is_resource_groups(value: Any) -> bool:
    """Kueue's ``resourceGroups``: a list of ``coveredResources`` and ``flavors``."""
    return (
        isinstance(value, list)
        and bool(value)
        and all(isinstance(group, Mapping) and "flavors" in group for group in value)
    )


def _resource_group_leaves(
    groups: Sequence[Mapping[str, Any]],
) -> Iterable[tuple[tuple[str, ...], str]]:
    """A ClusterQueue's (or Cohort's) quotas by flavor and resource, which name them in
    Kueue whatever group they are in (``a100-80gb / nvidia.com/gpu / nominalQuota``, without
    the field's own name: a flavor is in one group only)."""
    for number, group in enumerate(groups, start=1):
        covered = group.get("coveredResources")
        if covered is not None:
            yield (f"resource group {number}", "coveredResources"), scalar_text(covered)
        for flavor in group.get("flavors") or []:
            for quota in flavor.get("resources") or []:
                where = (str(flavor.get("name", "")), str(quota.get("name", "")))
                for key, amount in quota.items():
                    if key != "name":
                        yield (*where, str(key)), scalar_text(amount)


def _named_items(value: Any) -> list[tuple[str, Any]] | None:
    """A list of mappings each named by the same identity keys (``name``, or a LimitRange
    item's type and resource), as (name, the rest); None for any other value."""
    if not isinstance(value, list) or not value:
        return None
    if not all(isinstance(item, Mapping) for item in value):
        return None
    keys = [k for k in IDENTITY_KEYS if all(isinstance(item.get(k), str) for item in value)]
    if not keys:
        return None
    names = [" ".join(item[k] for k in keys) for item in value]
    if len(set(names)) != len(names):
        return None
    rests = [{k: v for k, v in item.items() if k not in keys} for item in value]
    if not any(rests):
        return None
    return list(zip(names, rests, strict=True))


def scalar_text(value: Any) -> str:
    """One value as a person reads it: lists compactly, empty values as "not set", a moment
    recorded in ISO 8601 as "2026-12-07 00:00 UTC"."""
    if value is None or value == "":
        return NOT_SET
    if isinstance(value, str) and ISO_MOMENT.match(value):
        return _moment_text(value)
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, Mapping):
        if not value:
            return "(empty)"
        return ", ".join(f"{k}={scalar_text(v)}" for k, v in value.items())
    if isinstance(value, list | tuple):
        if not value:
            return "none"
        shown = [scalar_text(item) for item in value[:MAX_LIST_ITEMS]]
        more = len(value) - MAX_LIST_ITEMS
        return ", ".join(shown) + (f" and {more} more" if more > 0 else "")
    return str(value)


def _moment_text(value: str) -> str:
    """An ISO 8601 moment in UTC as a person reads it (the value itself when it is none)."""
    try:
        moment = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return value
    if moment.tzinfo is None:
        return f"{moment:%Y-%m-%d %H:%M}"
    return f"{moment.astimezone(dt.UTC):%Y-%m-%d %H:%M} UTC"


# The pages an audited object is shown on, by its target type (``app_label.model_name``):
# (URL name, whether it takes the object's id, the page's fragment naming the object).
TARGET_PAGES: dict[str, tuple[str, bool, str]] = {
    "changes.migchangerequest": ("change-detail", True, ""),
    "changes.quotachangerequest": ("quota-detail", True, ""),
    "tenants.team": ("home", False, "team-{id}-summary"),
    "tenants.namespace": ("home", False, "namespace-{id}-title"),
    "queues.clusterqueue": ("queues", False, "cluster-queue-{id}-title"),
    "queues.cohort": ("queues", False, ""),
    "queues.localqueue": ("queues", False, "lq-title"),
    "tenants.priorityclass": ("queues", False, "pc-title"),
    "fleet.nodepool": ("fleet", False, ""),
    "budgets.budget": ("budget-page", True, ""),
    "budgets.budgetextension": ("budgets", False, "extension-{id}"),
}


def cause_text(cause: str) -> str:
    """How a row names the reviewed request it carried out (``changes.quotachangerequest:42``
    reads "Quota request #42"); "" when it carried out none."""
    label, _, pk = cause.partition(":")
    if not pk:
        return ""
    model = label.partition(".")[2]
    return f"{NOUNS.get(model, model)} #{pk}"


def cause_link(cause: str) -> Link | None:
    """The page of the request a row carried out, or None."""
    label, _, pk = cause.partition(":")
    return target_link(label, pk)


def target_link(target_type: str, target_id: str) -> Link | None:
    """Where the row's object is shown, or None when it has no page."""
    page = TARGET_PAGES.get(target_type)
    if page is None or not target_id.isdigit():
        return None
    url_name, takes_id, fragment = page
    return Link(url_name, (target_id,) if takes_id else (), fragment.format(id=target_id))
