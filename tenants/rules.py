"""Pure rules for namespace quotas and container limits (no I/O, no queries).

They follow what the Kubernetes API server validates and, beyond it, what it silently
accepts but never enforces (see the README's "Quota rules"). Each rule returns messages;
models and services turn them into field errors (refused) or warnings (accepted, shown).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from fractions import Fraction

from gpus.catalog import unknown_gpu_resource_note
from portal.names import qualified_name_errors
from portal.quantity import (
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
    r".+\.storageclass\.storage\.k8s\.io/persistentvolumeclaims)$"
)
_HUGEPAGES = re.compile(r"^(requests\.|limits\.)?hugepages-[0-9A-Za-z.]+$")
_STORAGE_CLASS = re.compile(
    r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?\.storageclass\.storage\.k8s\.io/"
    r"(requests\.storage|persistentvolumeclaims)$"
)
_COUNT = re.compile(r"^count/[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")
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
    ):
        check.errors.append(
            f"resource: {resource!r} is not a quota resource: use requests.cpu, "
            "requests.memory, pods, count/<resource>, or requests.<domain>/<name> for devices "
            "such as requests.nvidia.com/gpu"
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
    default, request = values.get("default"), values.get("default_request")
    if default is not None and request is not None:
        if extended and default != request:
            check.errors.append(
                f"default_request: default value {spec.default} must equal defaultRequest "
                f"value {spec.default_request} in {resource} (devices cannot be overcommitted)"
            )
        elif request > default:
            check.errors.append(
                f"default_request: default request {spec.default_request} must be less than "
                f"or equal to the default limit {spec.default}"
            )
    if extended and (spec.default or spec.default_request):
        check.warnings.append(
            f"A default for {resource} is injected into every container that does not set it, "
            "sidecars and init containers included: every pod in the namespace then asks for "
            f"{resource} and waits for one. Prefer max only, and let workloads ask explicitly."
        )
    if extended and spec.min:
        check.warnings.append(
            f"min for {resource} rejects every container that does not request it, "
            "sidecars included. Prefer max only."
        )
    return check
