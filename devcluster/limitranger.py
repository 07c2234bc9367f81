"""LimitRange as the real API server applies it: how a LimitRange is stored (its defaulting)
and what the LimitRanger admission plugin does to a pod (defaults, then min/max checks).

Stored: for a ``Container`` item, an unset ``default`` takes ``max``, an unset
``defaultRequest`` takes ``default``, then ``min`` (so a LimitRange with only ``max`` hands
that maximum to every container that does not set the resource). Admission: every container
and init container that does not set a resource gets the defaults, the pod is annotated with
what was set (``kubernetes.io/limit-ranger``), then each item's min and max are checked.
"""

from __future__ import annotations

from collections.abc import Iterable
from fractions import Fraction
from typing import Any

from devcluster import quantity
from devcluster.errors import APIError

Obj = dict[str, Any]

ANNOTATION = "kubernetes.io/limit-ranger"


def stored(limit_range: Obj) -> Obj:
    """The LimitRange as the API server stores it (``SetDefaults_LimitRangeItem``)."""
    for item in (limit_range.get("spec") or {}).get("limits") or []:
        if item.get("type") != "Container":
            continue
        default = dict(item.get("default") or {})
        request = dict(item.get("defaultRequest") or {})
        for name, value in (item.get("max") or {}).items():
            default.setdefault(name, value)
        for name, value in default.items():
            request.setdefault(name, value)
        for name, value in (item.get("min") or {}).items():
            request.setdefault(name, value)
        if default:
            item["default"] = default
        if request:
            item["defaultRequest"] = request
    return limit_range


def _defaults(limit_range: Obj) -> tuple[dict[str, str], dict[str, str]]:
    limits: dict[str, str] = {}
    requests: dict[str, str] = {}
    for item in (limit_range.get("spec") or {}).get("limits") or []:
        if item.get("type") == "Container":
            limits.update(item.get("default") or {})
            requests.update(item.get("defaultRequest") or {})
    return limits, requests


def _merge(
    container: Obj, limits: dict[str, str], requests: dict[str, str], kind: str
) -> list[str]:
    """Fill what the container does not set; the annotation's parts for it."""
    resources = container.setdefault("resources", {})
    set_limits = [name for name in limits if name not in (resources.get("limits") or {})]
    set_requests = [name for name in requests if name not in (resources.get("requests") or {})]
    for name in set_limits:
        resources.setdefault("limits", {})[name] = limits[name]
    for name in set_requests:
        resources.setdefault("requests", {})[name] = requests[name]
    parts = []
    if set_requests:
        parts.append(f"{', '.join(sorted(set_requests))} request for {kind} {container['name']}")
    if set_limits:
        parts.append(f"{', '.join(sorted(set_limits))} limit for {kind} {container['name']}")
    return parts


def _containers(pod: Obj) -> Iterable[tuple[Obj, str]]:
    spec = pod.get("spec") or {}
    for container in spec.get("containers") or []:
        yield container, "container"
    for container in spec.get("initContainers") or []:
        yield container, "init container"


def _min_max(item: Obj, scope: str, requests: dict[str, Any], limits: dict[str, Any]) -> list[str]:
    errors = []
    for name, value in sorted((item.get("min") or {}).items()):
        if name not in requests:
            errors.append(f"minimum {name} usage per {scope} is {value}.  No request is specified")
        elif quantity.parse(requests[name]) < quantity.parse(value):
            errors.append(
                f"minimum {name} usage per {scope} is {value}, but request is {requests[name]}"
            )
    for name, value in sorted((item.get("max") or {}).items()):
        if name not in limits:
            errors.append(f"maximum {name} usage per {scope} is {value}.  No limit is specified")
        elif quantity.parse(limits[name]) > quantity.parse(value):
            errors.append(
                f"maximum {name} usage per {scope} is {value}, but limit is {limits[name]}"
            )
    return errors


def _pod_sums(pod: Obj, key: str) -> dict[str, Any]:
    """A pod's total of ``requests`` or ``limits``: its containers' sum, or its largest init
    container where that is more."""
    total: dict[str, Fraction] = {}
    spec = pod.get("spec") or {}
    for container in spec.get("containers") or []:
        for name, value in ((container.get("resources") or {}).get(key) or {}).items():
            total[name] = total.get(name, Fraction(0)) + quantity.parse(value)
    for container in spec.get("initContainers") or []:
        for name, value in ((container.get("resources") or {}).get(key) or {}).items():
            total[name] = max(total.get(name, Fraction(0)), quantity.parse(value))
    return {name: quantity.fmt(value) for name, value in total.items()}


def admit(pod: Obj, limit_ranges: Iterable[Obj]) -> None:
    """The LimitRanger plugin on a pod create: defaults, annotation, then min/max (403)."""
    errors: list[str] = []
    for limit_range in sorted(limit_ranges, key=lambda lr: lr["metadata"]["name"]):
        limits, requests = _defaults(limit_range)
        parts: list[str] = []
        for container, kind in _containers(pod):
            parts.extend(_merge(container, limits, requests, kind))
        if parts:
            annotations = pod.setdefault("metadata", {}).setdefault("annotations", {})
            annotations[ANNOTATION] = "LimitRanger plugin set: " + "; ".join(parts)
        for item in (limit_range.get("spec") or {}).get("limits") or []:
            if item.get("type") == "Container":
                for container, _kind in _containers(pod):
                    resources = container.get("resources") or {}
                    errors.extend(
                        _min_max(
                            item,
                            "Container",
                            resources.get("requests") or {},
                            resources.get("limits") or {},
                        )
                    )
            elif item.get("type") == "Pod":
                errors.extend(
                    _min_max(item, "Pod", _pod_sums(pod, "requests"), _pod_sums(pod, "limits"))
                )
    if errors:
        name = pod["metadata"].get("name", "")
        reason = errors[0] if len(errors) == 1 else f"[{', '.join(errors)}]"
        raise APIError(
            403, f'pods "{name}" is forbidden: {reason}', details={"name": name, "kind": "pods"}
        )
