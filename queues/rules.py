"""Pure rules for Kueue objects: what Kueue's CRD schema, its CEL rules and its validating
webhook enforce (see the README's "Queue rules"), checked before anything is applied.

Each function returns a list of :class:`Issue`; a path names the field in Kueue's own
spelling (``resourceGroups[0].flavors[1].resources[0].nominalQuota``) so the message points
where the user typed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from portal.vocabulary.names import (
    dns1123_subdomain_errors,
    label_value_errors,
    qualified_name_errors,
)
from portal.vocabulary.quantity import QuantityError, bound_error, is_whole, parse_quantity

MAX_RESOURCE_GROUPS = 16
MAX_LIST = 64  # coveredResources, flavors, resources: 1..64 each
MAX_FLAVORS_PER_CQ = 256
MAX_RESOURCES_PER_CQ = 256
MAX_FLAVOR_RESOURCES_PER_GROUP = 512
MAX_FLAVOR_ITEMS = 8  # nodeLabels, nodeTaints, tolerations
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
TOLERATION_OPERATORS = ("Equal", "Exists")


@dataclass(frozen=True)
class Issue:
    """A refused value: ``field`` is the model field, ``path`` the place inside it."""

    field: str
    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


def _quantity(value: Any) -> Fraction:
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise QuantityError(f"{value!r} is not a quantity")
    return parse_quantity(value)


def check_weight(value: str, field: str = "fair_sharing_weight") -> list[Issue]:
    """``fairSharing.weight``: a quantity >= 0 and not in (0, 1n] (Kueue webhook)."""
    if value in ("", None):
        return []
    try:
        weight = _quantity(value)
    except QuantityError as exc:
        return [Issue(field, "", str(exc))]
    if weight < 0:
        return [Issue(field, "", "must be greater than or equal to 0")]
    if 0 < weight <= Fraction(1, 10**9):
        return [Issue(field, "", "must be 0 or greater than 1n (0.000000001)")]
    return []


def check_resource_groups(
    groups: Any,
    *,
    owner: str,
    has_parent: bool,
    known_flavors: Iterable[str] | None = None,
    in_counter_units: Callable[[str], bool] | None = None,
) -> list[Issue]:
    """Check ``resourceGroups`` of a ClusterQueue (``owner="ClusterQueue"``) or a Cohort.

    ``has_parent`` is whether the ClusterQueue has a cohort (or the Cohort a parent):
    borrowing and lending limits need one. ``known_flavors``, when given, are the flavor
    names the portal manages; referring to any other is refused (Kueue would accept it and
    leave the queue inactive). ``in_counter_units``: whether Kueue charges a resource in a
    DRA counter's units (asked only of a whole amount beyond a count of devices: a memory
    counter's quota is bytes, ``160Gi``, kept within an int64 as any quantity).
    """
    if not isinstance(groups, list):
        return [Issue("resource_groups", "resourceGroups", "must be a list of resource groups")]
    check = _ResourceGroups(
        owner=owner,
        has_parent=has_parent,
        known=set(known_flavors) if known_flavors is not None else None,
        in_counter_units=in_counter_units or (lambda _: False),
    )
    if len(groups) > MAX_RESOURCE_GROUPS:
        check.add("resourceGroups", f"must have at most {MAX_RESOURCE_GROUPS} groups")
    for gi, group in enumerate(groups):
        check.group(gi, group)
    if owner == "ClusterQueue":
        if check.total_flavors > MAX_FLAVORS_PER_CQ:
            check.add("resourceGroups", f"must have at most {MAX_FLAVORS_PER_CQ} flavors in all")
        if check.total_resources > MAX_RESOURCES_PER_CQ:
            check.add(
                "resourceGroups", f"must cover at most {MAX_RESOURCES_PER_CQ} resources in all"
            )
    return check.issues


@dataclass
class _ResourceGroups:
    """What checking one object's resource groups has found and seen so far."""

    owner: str
    has_parent: bool
    known: set[str] | None
    in_counter_units: Callable[[str], bool]
    issues: list[Issue] = field(default_factory=list)
    seen_resources: dict[str, int] = field(default_factory=dict)  # resource -> group
    seen_flavors: dict[str, int] = field(default_factory=dict)  # flavor -> group
    total_flavors: int = 0
    total_resources: int = 0

    def add(self, path: str, message: str) -> None:
        self.issues.append(Issue("resource_groups", path, message))

    def group(self, gi: int, group: Any) -> None:
        gpath = f"resourceGroups[{gi}]"
        if not isinstance(group, Mapping):
            self.add(gpath, "must be an object with coveredResources and flavors")
            return
        extra = set(group) - {"coveredResources", "flavors"}
        if extra:
            self.add(gpath, f"unknown field(s): {', '.join(sorted(extra))}")
        covered = self.covered(gi, gpath, group.get("coveredResources"))
        flavors = group.get("flavors")
        if not isinstance(flavors, list) or not flavors:
            self.add(f"{gpath}.flavors", "must list at least one flavor")
            return
        if len(flavors) > MAX_LIST:
            self.add(f"{gpath}.flavors", f"must have at most {MAX_LIST} flavors")
        if (
            len(flavors) * len(covered) > MAX_FLAVOR_RESOURCES_PER_GROUP
            and self.owner == "ClusterQueue"
        ):
            self.add(
                gpath,
                f"must have at most {MAX_FLAVOR_RESOURCES_PER_GROUP} flavor x resource entries",
            )
        self.total_flavors += len(flavors)
        for fi, flavor in enumerate(flavors):
            self.flavor(gi, f"{gpath}.flavors[{fi}]", flavor, covered)

    def covered(self, gi: int, gpath: str, covered: Any) -> list[Any]:
        """The group's covered resources (each in one group only), as a list."""
        if not isinstance(covered, list) or not covered:
            self.add(f"{gpath}.coveredResources", "must list at least one resource")
            return []
        if len(covered) > MAX_LIST:
            self.add(f"{gpath}.coveredResources", f"must have at most {MAX_LIST} resources")
        for ri, name in enumerate(covered):
            rpath = f"{gpath}.coveredResources[{ri}]"
            if not isinstance(name, str):
                self.add(rpath, "must be a resource name")
                continue
            for error in qualified_name_errors(name):
                self.add(rpath, error)
            if name.startswith(("requests.", "limits.")):
                self.add(rpath, "name the resource itself (nvidia.com/gpu), not a quota key")
            if name in self.seen_resources:
                self.add(
                    rpath,
                    f"Duplicate value: {name!r} is already covered by "
                    f"resourceGroups[{self.seen_resources[name]}]; a resource may appear in "
                    "only one group",
                )
            else:
                self.seen_resources[name] = gi
        self.total_resources += len(covered)
        return covered

    def flavor(self, gi: int, fpath: str, flavor: Any, covered: list[Any]) -> None:
        """One flavor of a group: a known name, in one group only, a quota per resource."""
        if not isinstance(flavor, Mapping):
            self.add(fpath, "must be an object with name and resources")
            return
        extra = set(flavor) - {"name", "resources"}
        if extra:
            self.add(fpath, f"unknown field(s): {', '.join(sorted(extra))}")
        self.flavor_name(gi, f"{fpath}.name", flavor.get("name"))
        resources = flavor.get("resources")
        if not isinstance(resources, list) or not resources:
            self.add(f"{fpath}.resources", "must list a quota for every covered resource")
            return
        if len(resources) != len(covered):
            self.add(
                f"{fpath}.resources",
                f"flavors must have the same number of resources as the coveredResources "
                f"({len(resources)} given, {len(covered)} covered)",
            )
        for ri, quota in enumerate(resources):
            self.issues.extend(
                _check_flavor_quota(
                    quota,
                    in_counter_units=self.in_counter_units,
                    path=f"{fpath}.resources[{ri}]",
                    expected=covered[ri] if ri < len(covered) else None,
                    owner=self.owner,
                    has_parent=self.has_parent,
                )
            )

    def flavor_name(self, gi: int, path: str, name: Any) -> None:
        if not isinstance(name, str) or not name:
            self.add(path, "is required")
            return
        for error in dns1123_subdomain_errors(name):
            self.add(path, error)
        if self.known is not None and name not in self.known:
            self.add(
                path,
                f"no ResourceFlavor named {name!r}; create it first (Kueue would "
                "accept the name and leave the queue inactive with FlavorNotFound)",
            )
        if name in self.seen_flavors:
            self.add(
                path,
                f"Duplicate value: flavor {name!r} already appears in "
                f"resourceGroups[{self.seen_flavors[name]}]; a flavor may appear in only "
                "one group",
            )
        else:
            self.seen_flavors[name] = gi


def _check_flavor_quota(
    quota: Any,
    *,
    path: str,
    expected: str | None,
    owner: str,
    has_parent: bool,
    in_counter_units: Callable[[str], bool] = lambda _: False,
) -> list[Issue]:
    field = "resource_groups"
    issues: list[Issue] = []
    if not isinstance(quota, Mapping):
        return [Issue(field, path, "must be an object with name and nominalQuota")]
    extra = set(quota) - {"name", "nominalQuota", "borrowingLimit", "lendingLimit"}
    if extra:
        issues.append(Issue(field, path, f"unknown field(s): {', '.join(sorted(extra))}"))
    name = quota.get("name")
    if expected is not None and name != expected:
        issues.append(
            Issue(field, f"{path}.name", f"must match the name in coveredResources ({expected!r})")
        )
    parent = "cohort" if owner == "ClusterQueue" else "parent"
    values: dict[str, Fraction] = {}
    for key in ("nominalQuota", "borrowingLimit", "lendingLimit"):
        if key not in quota or quota[key] is None:
            if key == "nominalQuota":
                issues.append(Issue(field, f"{path}.nominalQuota", "is required"))
            continue
        try:
            amount = _quantity(quota[key])
        except QuantityError as exc:
            issues.append(Issue(field, f"{path}.{key}", str(exc)))
            continue
        if amount < 0:
            issues.append(Issue(field, f"{path}.{key}", "must be greater than or equal to 0"))
            continue
        counted = isinstance(name, str) and "/" in name
        if counted and not is_whole(amount):
            issues.append(
                Issue(field, f"{path}.{key}", f"must be a whole number of {name} (devices)")
            )
        too_large = bound_error(amount, whole=counted)
        if too_large and counted and is_whole(amount) and in_counter_units(str(name)):
            too_large = bound_error(amount, whole=False)
        if too_large:
            issues.append(Issue(field, f"{path}.{key}", too_large))
            continue
        values[key] = amount
    for key in ("borrowingLimit", "lendingLimit"):
        if quota.get(key) is not None and not has_parent:
            issues.append(
                Issue(
                    field,
                    f"{path}.{key}",
                    f"{key} must be nil when {parent} is empty: set a {parent} to "
                    f"{'borrow' if key == 'borrowingLimit' else 'lend'}, or clear the limit",
                )
            )
    nominal, lending = values.get("nominalQuota"), values.get("lendingLimit")
    if (
        owner == "ClusterQueue"
        and nominal is not None
        and lending is not None
        and lending > nominal
    ):
        issues.append(
            Issue(
                field,
                f"{path}.lendingLimit",
                f"must be less than or equal to the nominalQuota ({quota['nominalQuota']})",
            )
        )
    return issues


def check_preemption(
    *, within_cluster_queue: str, reclaim_within_cohort: str, borrow_within_cohort: str
) -> list[Issue]:
    if borrow_within_cohort != "Never" and reclaim_within_cohort == "Never":
        return [
            Issue(
                "preemption_borrow_within_cohort",
                "",
                "reclaimWithinCohort=Never and borrowWithinCohort.Policy!=Never: borrowing "
                "within the cohort by preemption needs reclaimWithinCohort to be enabled",
            )
        ]
    return []


def check_fungibility(
    *, when_can_borrow: str, when_can_preempt: str, preference: str
) -> list[Issue]:
    if preference and not (when_can_borrow == when_can_preempt == "TryNextFlavor"):
        return [
            Issue(
                "flavor_fungibility_preference",
                "",
                "a preference is allowed only when both whenCanBorrow and whenCanPreempt are "
                "TryNextFlavor",
            )
        ]
    return []


def check_label_selector(selector: Any, field: str = "namespace_selector") -> list[Issue]:
    """A Kubernetes LabelSelector: matchLabels and matchExpressions, nothing else."""
    if selector is None:
        return []
    issues: list[Issue] = []
    if not isinstance(selector, Mapping):
        return [Issue(field, "", "must be a label selector object ({} selects every namespace)")]
    extra = set(selector) - {"matchLabels", "matchExpressions"}
    if extra:
        issues.append(Issue(field, "", f"unknown field(s): {', '.join(sorted(extra))}"))
    labels = selector.get("matchLabels", {})
    if not isinstance(labels, Mapping):
        issues.append(Issue(field, "matchLabels", "must be a map of label keys to values"))
        labels = {}
    for key, value in labels.items():
        issues.extend(Issue(field, f"matchLabels[{key}]", e) for e in qualified_name_errors(key))
        if not isinstance(value, str):
            issues.append(Issue(field, f"matchLabels[{key}]", "must be a string"))
        else:
            issues.extend(Issue(field, f"matchLabels[{key}]", e) for e in label_value_errors(value))
    expressions = selector.get("matchExpressions", [])
    if not isinstance(expressions, list):
        return [*issues, Issue(field, "matchExpressions", "must be a list")]
    for i, expr in enumerate(expressions):
        path = f"matchExpressions[{i}]"
        if not isinstance(expr, Mapping):
            issues.append(Issue(field, path, "must be an object with key, operator, values"))
            continue
        key, op, values = expr.get("key", ""), expr.get("operator"), expr.get("values")
        issues.extend(Issue(field, f"{path}.key", e) for e in qualified_name_errors(str(key)))
        if op in ("In", "NotIn"):
            if not values or not isinstance(values, list):
                issues.append(
                    Issue(
                        field,
                        f"{path}.values",
                        "must be specified when `operator` is 'In' or 'NotIn'",
                    )
                )
        elif op in ("Exists", "DoesNotExist"):
            if values:
                issues.append(
                    Issue(
                        field,
                        f"{path}.values",
                        "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
                    )
                )
        else:
            issues.append(
                Issue(field, f"{path}.operator", "must be In, NotIn, Exists or DoesNotExist")
            )
        for j, value in enumerate(values or []):
            issues.extend(
                Issue(field, f"{path}.values[{j}]", e) for e in label_value_errors(str(value))
            )
    return issues


def check_node_labels(labels: Any) -> list[Issue]:
    field = "node_labels"
    if not isinstance(labels, Mapping):
        return [Issue(field, "", "must be a map of label keys to values")]
    issues: list[Issue] = []
    if len(labels) > MAX_FLAVOR_ITEMS:
        issues.append(Issue(field, "", f"must have at most {MAX_FLAVOR_ITEMS} labels"))
    for key, value in labels.items():
        issues.extend(Issue(field, key, e) for e in qualified_name_errors(key))
        if not isinstance(value, str):
            issues.append(Issue(field, key, "must be a string"))
        else:
            issues.extend(Issue(field, key, e) for e in label_value_errors(value))
    return issues


def check_taints(taints: Any) -> list[Issue]:
    field = "node_taints"
    if not isinstance(taints, list):
        return [Issue(field, "", "must be a list of taints")]
    issues: list[Issue] = []
    if len(taints) > MAX_FLAVOR_ITEMS:
        issues.append(Issue(field, "", f"must have at most {MAX_FLAVOR_ITEMS} taints"))
    seen: set[tuple[str, str]] = set()
    for i, taint in enumerate(taints):
        path = f"[{i}]"
        if not isinstance(taint, Mapping):
            issues.append(Issue(field, path, "must be an object with key, value, effect"))
            continue
        extra = set(taint) - {"key", "value", "effect"}
        if extra:
            issues.append(Issue(field, path, f"unknown field(s): {', '.join(sorted(extra))}"))
        key, effect = str(taint.get("key", "")), taint.get("effect")
        issues.extend(Issue(field, f"{path}.key", e) for e in qualified_name_errors(key))
        issues.extend(
            Issue(field, f"{path}.value", e)
            for e in label_value_errors(str(taint.get("value", "")))
        )
        if effect not in TAINT_EFFECTS:
            issues.append(
                Issue(field, f"{path}.effect", f"must be one of {', '.join(TAINT_EFFECTS)}")
            )
        if (key, str(effect)) in seen:
            issues.append(Issue(field, path, f"Duplicate value: taint {key}:{effect}"))
        seen.add((key, str(effect)))
    return issues


def check_tolerations(tolerations: Any) -> list[Issue]:
    field = "tolerations"
    if not isinstance(tolerations, list):
        return [Issue(field, "", "must be a list of tolerations")]
    issues: list[Issue] = []
    if len(tolerations) > MAX_FLAVOR_ITEMS:
        issues.append(Issue(field, "", f"must have at most {MAX_FLAVOR_ITEMS} tolerations"))
    for i, tol in enumerate(tolerations):
        path = f"[{i}]"
        if not isinstance(tol, Mapping):
            issues.append(Issue(field, path, "must be an object"))
            continue
        extra = set(tol) - {"key", "operator", "value", "effect", "tolerationSeconds"}
        if extra:
            issues.append(Issue(field, path, f"unknown field(s): {', '.join(sorted(extra))}"))
        key, op = str(tol.get("key", "")), tol.get("operator", "Equal")
        if key:
            issues.extend(Issue(field, f"{path}.key", e) for e in qualified_name_errors(key))
        elif op != "Exists":
            issues.append(
                Issue(field, f"{path}.operator", "operator must be Exists when key is empty")
            )
        if op not in TOLERATION_OPERATORS:
            issues.append(Issue(field, f"{path}.operator", "must be Equal or Exists"))
        if op == "Exists" and tol.get("value"):
            issues.append(
                Issue(field, f"{path}.value", "value must be empty when operator is Exists")
            )
        effect = tol.get("effect")
        if effect not in (None, "", *TAINT_EFFECTS):
            issues.append(
                Issue(field, f"{path}.effect", f"must be one of {', '.join(TAINT_EFFECTS)}")
            )
        if tol.get("tolerationSeconds") is not None and effect != "NoExecute":
            issues.append(
                Issue(
                    field,
                    f"{path}.tolerationSeconds",
                    "effect must be NoExecute when tolerationSeconds is set",
                )
            )
    return issues


def quota_entries(groups: Sequence[Mapping[str, Any]]) -> Iterator[tuple[str, str, Any]]:
    """Every resource quota of a ClusterQueue's (or Cohort's) resource groups: its key
    (``g<group>f<flavor>r<resource>``, stable while the groups keep their shape), the
    flavor's name and the quota entry itself (``name``, ``nominalQuota``, limits), to read
    or to change in place."""
    for gi, group in enumerate(groups or []):
        for fi, flavor in enumerate(group.get("flavors") or []):
            for ri, quota in enumerate(flavor.get("resources") or []):
                yield quota_key(gi, fi, ri), flavor["name"], quota


def quantities_as_text(groups: Sequence[Mapping[str, Any]]) -> None:
    """Write every quota's amounts as text, in place (``8`` from a JSON client and ``"8"``
    from a form are one quantity and render alike; stored alike, a save that changes
    neither is no change). Assumes groups passed :func:`check_resource_groups`."""
    for _, _, quota in quota_entries(groups):
        for key in ("nominalQuota", "borrowingLimit", "lendingLimit"):
            if isinstance(quota.get(key), int):
                quota[key] = str(quota[key])


def quota_key(group: int | str, flavor: int | str, resource: int | str) -> str:
    """The key of one resource quota inside resource groups (form inputs are named by it)."""
    return f"g{group}f{flavor}r{resource}"


def group_totals(groups: Sequence[Mapping[str, Any]]) -> dict[tuple[str, str], Fraction]:
    """Nominal quota per (flavor, resource); assumes groups passed :func:`check_resource_groups`."""
    return {
        (flavor, quota["name"]): _quantity(quota["nominalQuota"])
        for _, flavor, quota in quota_entries(groups)
    }


@dataclass(frozen=True)
class Promise:
    """One GPU nominal quota of an edited ClusterQueue next to the fleet behind its flavor."""

    offered: int | None  # what the flavor's nodes offer now (None: unknown)
    promised: int  # what every queue would promise on (flavor, resource) with the edit
    raised: bool  # the edit raises this queue's quota
    ceiling: int | None  # the most the nodes behind the flavor could ever offer of it
    unit: str = ""  # a DRA-mapped resource's: "devices", or the counter Kueue charges in

    @property
    def unbacked(self) -> bool:
        """A raise that leaves the queues promising more than the flavor offers."""
        return self.raised and self.offered is not None and self.promised > self.offered

    @property
    def beyond_ceiling(self) -> bool:
        return self.raised and self.ceiling is not None and self.promised > self.ceiling


def promises(
    old: dict[tuple[str, str], Any],
    new: dict[tuple[str, str], Any],
    others: dict[tuple[str, str], Any],
    behind: dict[tuple[str, str], int] | None,
    ceiling: dict[tuple[str, str], int] | None,
    devices: Mapping[str, int] | None = None,
    units: Mapping[str, str] | None = None,
) -> dict[tuple[str, str], Promise]:
    """Per GPU (flavor, resource) of an edited queue: what it and the other queues would
    promise against what the nodes behind the flavor offer, and could ever offer.
    ``devices``: resource -> the most Kueue's DRA mapping of it could be backed by (the
    cluster's published devices, whatever the flavor, or for a counter source the counter
    they share): offered now and ever, in ``units`` (resource -> ``devices`` or the
    counter's name)."""
    out = {}
    devices = devices or {}
    for key, amount in new.items():
        resource = key[1]
        if resource in devices:
            promised = sum(v for (_, r), v in others.items() if r == resource) + amount
            out[key] = Promise(
                offered=devices[resource],
                promised=int(promised),
                raised=amount > old.get(key, 0),
                ceiling=devices[resource],
                unit=(units or {}).get(resource, "devices"),
            )
            continue
        if not resource.startswith("nvidia.com/"):
            continue
        out[key] = Promise(
            offered=None if behind is None else behind.get(key, 0),
            promised=int(others.get(key, 0) + amount),
            raised=amount > old.get(key, 0),
            ceiling=None if ceiling is None else ceiling.get(key, 0),
        )
    return out
