"""Pure rules for namespace quotas and container limits (no I/O, no queries).

They follow what the Kubernetes API server validates and, beyond it, what it silently
accepts but never enforces (see the README's "Quota rules"). Each rule returns messages;
models and services turn them into field errors (refused) or warnings (accepted, shown).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from fractions import Fraction

from gpus.catalog import unknown_gpu_resource_note
from portal.vocabulary.names import qualified_name_errors
from portal.vocabulary.quantity import (
    QuantityError,
    bound_error,
    canonical_quantity,
    is_whole,
    parse_quantity,
    whole_count,
)

# Quota keys the API server knows without a domain prefix.
STANDARD_QUOTA_RESOURCES = frozenset(
    {
        "cpu",
        "memory",
        "requests.cpu",
        "requests.memory",
        "limits.cpu",
        "limits.memory",
        "ephemeral-storage",
        "requests.ephemeral-storage",
        "limits.ephemeral-storage",
        "requests.storage",
        "persistentvolumeclaims",
        "pods",
        "services",
        "services.loadbalancers",
        "services.nodeports",
        "replicationcontrollers",
        "resourcequotas",
        "secrets",
        "configmaps",
    }
)
# Keys whose value is a count of objects and so must be a whole number.
_COUNTED = re.compile(
    r"^(pods|services|services\.loadbalancers|services\.nodeports|replicationcontrollers|"
    r"resourcequotas|secrets|configmaps|persistentvolumeclaims|count/.+|"
    r".+\.storageclass\.storage\.k8s\.io/persistentvolumeclaims|"
    r".+\.deviceclass\.resource\.k8s\.io/devices)$"
)
_HUGEPAGES = re.compile(r"^(requests\.|limits\.)?hugepages-[0-9A-Za-z.]+$")
_STORAGE_CLASS = re.compile(
    r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?\.storageclass\.storage\.k8s\.io/"
    r"(requests\.storage|persistentvolumeclaims)$"
)
_COUNT = re.compile(r"^count/[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")
# DRA: the devices a namespace's claims may hold of one DeviceClass (KEP-4381's quota).
DEVICE_CLASS_QUOTA = re.compile(
    r"^(?P<device_class>[a-z0-9]([-a-z0-9.]*[a-z0-9])?)\.deviceclass\.resource\.k8s\.io/devices$"
)
# Resource names in a kubernetes.io or k8s.io domain are native, not extended.
_NATIVE_DOMAIN = re.compile(r"^([^/]*\.)?(kubernetes|k8s)\.io/")

LIMIT_TYPES = ("Container", "Pod")


@dataclass
class Check:
    """What a rule found: ``errors`` refuse the input, ``warnings`` accept it with a note."""

    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def is_extended_resource(name: str) -> bool:
    """A resource with a domain outside kubernetes.io, e.g. ``nvidia.com/gpu``."""
    return "/" in name and not _NATIVE_DOMAIN.match(name) and not name.startswith("count/")


def check_quantity(
    value: str, *, whole: bool, allow_zero: bool = True
) -> tuple[Fraction | None, list[str]]:
    """Parse a quantity for a resource; ``whole`` for devices and object counts."""
    try:
        amount = parse_quantity(value)
    except QuantityError as exc:
        return None, [str(exc)]
    if amount < 0:
        return amount, ["must be greater than or equal to 0"]
    if not allow_zero and amount == 0:
        return amount, ["must be greater than 0"]
    if whole and not is_whole(amount):
        return amount, ["must be a whole number: devices and objects are counted in units"]
    too_large = bound_error(amount, whole=whole)
    return amount, [too_large] if too_large else []


# Compute resources a ResourceQuota can track: every pod of the namespace must then ask for
# them, and Kueue charges what the pods ask for.
_COMPUTE = ("cpu", "memory")


def queue_coverage_notes(items: Iterable[str], queues: Mapping[str, Iterable[str]]) -> list[str]:
    """A quota that tracks CPU or memory in a namespace whose queues cover neither (``queues``:
    each ClusterQueue behind the namespace's LocalQueues, with its covered resources): the API
    server refuses a pod that does not ask for them, and Kueue refuses a workload that does
    ("resource cpu unavailable in ClusterQueue"), so no Kueue workload there can run."""
    if not queues:
        return []
    notes = []
    for compute in _COMPUTE:
        tracked = sorted(
            i for i in items if i in (compute, f"requests.{compute}", f"limits.{compute}")
        )
        blind = sorted(name for name, covered in queues.items() if compute not in set(covered))
        if tracked and blind:
            notes.append(
                f"{', '.join(tracked)}: every pod of this namespace must then ask for {compute}, "
                f"and {', '.join(blind)} does not cover {compute}, so Kueue refuses every "
                f"workload whose pods do (resource {compute} unavailable in ClusterQueue): no "
                "Kueue workload of this namespace can run. Track GPUs alone in this quota, or "
                f"cover {compute} in the ClusterQueue."
            )
    return notes


def check_quota_item(resource: str, hard: str) -> Check:
    """Check one ``ResourceQuota.spec.hard`` entry."""
    check = Check()
    resource = resource.strip()
    if not resource:
        check.errors.append("resource: this field is required")
        return check
    extended = is_extended_resource(resource)
    if extended:
        bare = resource.removeprefix("requests.").removeprefix("limits.")
        check.errors.extend(f"resource: {e}" for e in qualified_name_errors(bare))
        if "+" in bare:
            check.errors.append(
                f"resource: MIG resource names spell '+' as '.': {resource.replace('+', '.')}"
            )
        else:
            note = unknown_gpu_resource_note(bare)
            if note:
                check.warnings.append(note)
        unenforced = unenforced_quota_note(resource)
        if unenforced:
            check.warnings.append(unenforced)
    elif not (
        resource in STANDARD_QUOTA_RESOURCES
        or _HUGEPAGES.match(resource)
        or _STORAGE_CLASS.match(resource)
        or _COUNT.match(resource)
        or DEVICE_CLASS_QUOTA.match(resource)
    ):
        check.errors.append(
            f"resource: {resource!r} is not a quota resource: use requests.cpu, "
            "requests.memory, pods, count/<resource>, requests.<domain>/<name> for devices "
            "such as requests.nvidia.com/gpu, or <class>.deviceclass.resource.k8s.io/devices "
            "for DRA devices"
        )
    _, errors = check_quantity(hard, whole=counted_in_units(resource))
    check.errors.extend(f"hard: {e}" for e in errors)
    return check


def spelled_quantity(resource: str, value: str) -> str:
    """A valid quota value in the one spelling it is stored and shown in: counts of devices
    and objects as plain integers (``1e3`` is ``1000``), anything else in Kubernetes'
    canonical form (``0.5`` is ``500m``)."""
    try:
        return whole_count(value) if counted_in_units(resource) else canonical_quantity(value)
    except QuantityError:
        return value


def counted_in_units(resource: str) -> bool:
    """Devices and objects: a quota of them is a whole number."""
    return is_extended_resource(resource) or bool(_COUNTED.match(resource))


def unenforced_quota_note(resource: str) -> str:
    """Why a quota item of an extended resource is never enforced ("" when it is): the API
    server accepts ``limits.nvidia.com/gpu`` and bare ``nvidia.com/gpu``, Kubernetes counts
    only ``requests.nvidia.com/gpu``."""
    if not is_extended_resource(resource) or resource.startswith("requests."):
        return ""
    bare = resource.removeprefix("limits.")
    if resource.startswith("limits."):
        return (
            f"{resource} is accepted by the API server but never enforced: Kubernetes "
            f"counts extended resources in a quota only under requests.{bare} "
            "(devices cannot be overcommitted, so the request always equals the limit). "
            f"Use requests.{bare}."
        )
    return (
        f"{resource} is accepted by the API server but never enforced: extended "
        f"resources are counted only under requests.{bare}. Use requests.{bare}."
    )


@dataclass(frozen=True)
class LimitSpec:
    """One resource's limits for one LimitRange type; empty strings mean unset."""

    limit_type: str
    resource: str
    default: str = ""
    default_request: str = ""
    max: str = ""
    min: str = ""


def check_limit(spec: LimitSpec) -> Check:
    """Check one resource of a LimitRange item, as the API server does, plus GPU pitfalls."""
    check = Check()
    if spec.limit_type not in LIMIT_TYPES:
        check.errors.append(f"limit_type: must be one of {', '.join(LIMIT_TYPES)}")
    resource = spec.resource.strip()
    name_errors = qualified_name_errors(resource) if resource else ["this field is required"]
    check.errors.extend(f"resource: {e}" for e in name_errors)
    if resource.startswith(("requests.", "limits.")):
        check.errors.append(
            "resource: a LimitRange names the resource itself (nvidia.com/gpu), "
            "without requests./limits."
        )
    extended = is_extended_resource(resource)
    note = unknown_gpu_resource_note(resource)
    if note:
        check.warnings.append(note)
    values: dict[str, Fraction] = {}
    for name in ("default", "default_request", "max", "min"):
        text = getattr(spec, name)
        if not text:
            continue
        amount, errors = check_quantity(text, whole=extended)
        check.errors.extend(f"{name}: {e}" for e in errors)
        if amount is not None and not errors:
            values[name] = amount
    if not any(getattr(spec, n) for n in ("default", "default_request", "max", "min")):
        check.errors.append("set at least one of default, default_request, max or min")
    if spec.limit_type == "Pod" and (spec.default or spec.default_request):
        check.errors.append(
            "default: default and default_request may not be set when the type is Pod"
        )
    low, high = values.get("min"), values.get("max")
    if low is not None and high is not None and low > high:
        check.errors.append(f"min: min value {spec.min} is greater than max value {spec.max}")
    for name in ("default", "default_request"):
        amount = values.get(name)
        if amount is None:
            continue
        if high is not None and amount > high:
            check.errors.append(f"{name}: {getattr(spec, name)} is greater than max {spec.max}")
        if low is not None and amount < low:
            check.errors.append(f"{name}: {getattr(spec, name)} is less than min {spec.min}")
    # The API server compares what it stores: an unset default is the max, an unset default
    # request the default (or the min).
    stored = stored_limit(spec)
    default = _stored_value(values, spec, stored.default, "default")
    request = _stored_value(values, spec, stored.default_request, "default_request")
    if default is not None and request is not None and not check.errors:
        said_default = spec.default or f"{stored.default} (the max, stored as the default)"
        source = "default" if spec.default else "max" if spec.max else "min"
        said_request = spec.default_request or f"{stored.default_request} (from the {source})"

        if extended and default != request:
            check.errors.append(
                f"default_request: default value {said_default} must equal defaultRequest "
                f"value {said_request} in {resource} (devices cannot be overcommitted)"
            )
        elif request > default:
            check.errors.append(
                f"default_request: default request {said_request} must be less than "
                f"or equal to the default limit {said_default}"
            )
    if extended:
        check.warnings.extend(gpu_limit_pitfalls(spec))
    return check


WHOLE_GPU = "nvidia.com/gpu"


def _stored_value(
    values: dict[str, Fraction], spec: LimitSpec, text: str, name: str
) -> Fraction | None:
    """The parsed value the API server stores for ``name`` (the one given, or copied)."""
    if getattr(spec, name):
        return values.get(name)
    for source in ("default", "max", "min"):
        if getattr(spec, source) == text and source in values:
            return values[source]
    return None


def stored_limit(spec: LimitSpec) -> LimitSpec:
    """The item as the API server stores it: for a ``Container`` item an unset ``default``
    takes ``max``, and an unset ``defaultRequest`` takes ``default``, then ``min``."""
    if spec.limit_type != "Container":
        return spec
    default = spec.default or spec.max
    return replace(
        spec, default=default, default_request=spec.default_request or default or spec.min
    )


def gpu_limit_pitfalls(spec: LimitSpec) -> list[str]:
    """What a LimitRange item for a device (``nvidia.com/gpu``, a MIG profile) does to pods
    beyond what it says: defaults reach every container, a Pod ``max`` refuses pods without
    the resource, and Kueue charges the default request rather than a Job's limits."""
    resource, notes = spec.resource.strip(), []
    stored = stored_limit(spec)
    if stored.default:
        source = (
            f"Its max ({spec.max}) is stored as the default and defaultRequest, since they "
            "are unset: every"
            if not spec.default
            else "Every"
        )
        notes.append(
            f"{source} container that does not set {resource} gets {stored.default} of it, "
            "sidecars, init containers and CPU-only containers included, and waits for one. "
            "Kueue charges that default request for a Job that sets only limits, so a queue "
            "admits pods that then ask for more. Cap devices with the namespace quota "
            f"(requests.{resource}) and the team's queue instead; a container that must not get "
            f"it sets {resource}: 0."
        )
        if resource == WHOLE_GPU:
            notes.append(
                f"Pods that ask only for MIG slices (nvidia.com/mig-…) get {stored.default} "
                f"{resource} as well: they then need a whole GPU too, and no MIG change starts "
                "them."
            )
    if spec.limit_type == "Pod" and spec.max:
        notes.append(
            f"A Pod max for {resource} refuses every pod that does not set a {resource} limit "
            '(CPU-only pods included): the API server answers "No limit is specified".'
        )
    if spec.min:
        notes.append(
            f"min for {resource} refuses every container that does not request it, "
            "sidecars included."
        )
    return notes


def limit_range_pitfalls(specs: list[LimitSpec]) -> list[str]:
    """Across one namespace's items: defaults for two or more device resources land on the
    same containers at once (a MIG profile and another, or a whole GPU)."""
    defaulted = sorted(
        (stored.resource.strip(), stored.default)
        for stored in map(stored_limit, specs)
        if stored.limit_type == "Container"
        and stored.default
        and is_extended_resource(stored.resource)
    )
    if len(defaulted) < 2:
        return []
    amounts = " and ".join(f"{value} {name}" for name, value in defaulted)
    return [
        f"Every container that sets none of them gets {amounts} at once. A GPU offers one "
        "layout: such a pod needs several flavors together, which Kueue turns into a node "
        "selector no node matches."
    ]
