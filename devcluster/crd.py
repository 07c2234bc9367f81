"""What the API server does with a custom resource body: prune, default, validate.

Schemas come from the upstream CRDs in ``reference/crds``. Defaults are applied the way
structural schemas apply them (a default fills a missing property of an object that is
present); unknown fields are pruned and reported; enums, patterns, minimum and maxItems are
checked. The one CEL rule the portal's flow meets (borrowingLimit needs a cohort) is mirrored.
"""

from __future__ import annotations

import copy
import functools
import re
from pathlib import Path
from typing import Any

import yaml

CRD_DIR = Path(__file__).resolve().parent.parent / "reference" / "crds"
FILES = {
    ("kueue.x-k8s.io", "ClusterQueue"): "kueue/kueue.x-k8s.io_clusterqueues.yaml",
    ("kueue.x-k8s.io", "LocalQueue"): "kueue/kueue.x-k8s.io_localqueues.yaml",
    ("kueue.x-k8s.io", "ResourceFlavor"): "kueue/kueue.x-k8s.io_resourceflavors.yaml",
    ("kueue.x-k8s.io", "Cohort"): "kueue/kueue.x-k8s.io_cohorts.yaml",
    ("scheduling.volcano.sh", "Queue"): "volcano/scheduling.volcano.sh_queues.yaml",
}


@functools.cache
def schema(group: str, kind: str, version: str) -> dict[str, Any] | None:
    name = FILES.get((group, kind))
    if name is None:
        return None
    crd = yaml.safe_load((CRD_DIR / name).read_text())
    for entry in crd["spec"]["versions"]:
        if entry["name"] == version:
            return dict(entry["schema"]["openAPIV3Schema"])
    return None


def prune(obj: Any, node: dict[str, Any], path: str, unknown: list[str]) -> Any:
    """Drop fields the schema does not declare; list their paths in ``unknown``."""
    if isinstance(obj, dict):
        if node.get("x-kubernetes-preserve-unknown-fields"):
            return obj
        props = node.get("properties")
        extra = node.get("additionalProperties")
        if props is None and isinstance(extra, dict):
            return {
                k: prune(v, extra, f"{path}.{k}" if path else k, unknown) for k, v in obj.items()
            }
        if props is None:
            return obj
        out = {}
        for key, value in obj.items():
            child = f"{path}.{key}" if path else key
            if key in props:
                out[key] = prune(value, props[key], child, unknown)
            elif path == "" and key in ("apiVersion", "kind", "metadata"):
                out[key] = value
            else:
                unknown.append(child)
        return out
    if isinstance(obj, list) and isinstance(node.get("items"), dict):
        return [prune(item, node["items"], f"{path}[{i}]", unknown) for i, item in enumerate(obj)]
    return obj


def apply_defaults(obj: Any, node: dict[str, Any]) -> Any:
    if isinstance(obj, dict):
        props = node.get("properties") or {}
        for key, sub in props.items():
            if key not in obj and "default" in sub:
                obj[key] = copy.deepcopy(sub["default"])
        for key, value in obj.items():
            if key in props:
                obj[key] = apply_defaults(value, props[key])
    elif isinstance(obj, list) and isinstance(node.get("items"), dict):
        return [apply_defaults(item, node["items"]) for item in obj]
    return obj


def _type_ok(value: Any, node: dict[str, Any]) -> bool:
    kind = node.get("type")
    if node.get("x-kubernetes-int-or-string"):
        return isinstance(value, int | str) and not isinstance(value, bool)
    return {
        None: True,
        "object": isinstance(value, dict),
        "array": isinstance(value, list),
        "string": isinstance(value, str),
        "integer": isinstance(value, int) and not isinstance(value, bool),
        "number": isinstance(value, int | float) and not isinstance(value, bool),
        "boolean": isinstance(value, bool),
    }.get(kind, True)


def validate(obj: Any, node: dict[str, Any], path: str, causes: list[dict[str, str]]) -> None:
    """Collect API-server style causes for enum, pattern, type, minimum and maxItems."""
    if obj is None:
        return
    if not _type_ok(obj, node):
        causes.append(
            {
                "reason": "FieldValueTypeInvalid",
                "message": f'Invalid value: "{obj}": {path} in body must be of type '
                f'{node.get("type")}: "{type(obj).__name__}"',
                "field": path,
            }
        )
        return
    if "enum" in node and obj not in node["enum"]:
        supported = ", ".join(f'"{v}"' for v in node["enum"])
        causes.append(
            {
                "reason": "FieldValueNotSupported",
                "message": f'Unsupported value: "{obj}": supported values: {supported}',
                "field": path,
            }
        )
    if isinstance(obj, str) and "pattern" in node and not re.search(node["pattern"], obj):
        causes.append(
            {
                "reason": "FieldValueInvalid",
                "message": f'Invalid value: "{obj}": {path} in body should match '
                f"'{node['pattern']}'",
                "field": path,
            }
        )
    if (
        isinstance(obj, int | float)
        and not isinstance(obj, bool)
        and "minimum" in node
        and obj < node["minimum"]
    ):
        causes.append(
            {
                "reason": "FieldValueInvalid",
                "message": f"Invalid value: {obj}: {path} in body should be greater than "
                f"or equal to {node['minimum']}",
                "field": path,
            }
        )
    if isinstance(obj, list):
        if "maxItems" in node and len(obj) > node["maxItems"]:
            causes.append(
                {
                    "reason": "FieldValueTooMany",
                    "message": f"Too many: {len(obj)}: must have at most {node['maxItems']} items",
                    "field": path,
                }
            )
        if isinstance(node.get("items"), dict):
            for i, item in enumerate(obj):
                validate(item, node["items"], f"{path}[{i}]", causes)
    if isinstance(obj, dict):
        props = node.get("properties") or {}
        for key in node.get("required") or []:
            if key not in obj:
                causes.append(
                    {
                        "reason": "FieldValueRequired",
                        "message": "Required value",
                        "field": f"{path}.{key}" if path else key,
                    }
                )
        for key, value in obj.items():
            if key in props and not (path == "" and key == "metadata"):
                validate(value, props[key], f"{path}.{key}" if path else key, causes)


def cel_causes(
    kind: str, obj: dict[str, Any], old: dict[str, Any] | None = None
) -> list[dict[str, str]]:
    """CEL rules of the Kueue CRDs that the portal's flow can meet (the API server words
    them without the value since v1.34: ``Invalid value: <message>``)."""
    spec = obj.get("spec") or {}
    causes = []
    if kind == "LocalQueue" and old is not None:
        before = (old.get("spec") or {}).get("clusterQueue")
        if before is not None and spec.get("clusterQueue") != before:
            return [
                {
                    "reason": "FieldValueInvalid",
                    "message": f'Invalid value: "{spec.get("clusterQueue")}": field is immutable',
                    "field": "spec.clusterQueue",
                }
            ]
    if kind == "ClusterQueue" and not spec.get("cohortName"):
        for group in spec.get("resourceGroups") or []:
            for flavor in group.get("flavors") or []:
                for quota in flavor.get("resources") or []:
                    if quota.get("borrowingLimit") is not None:
                        causes.append(
                            {
                                "reason": "FieldValueInvalid",
                                "message": "Invalid value: borrowingLimit must be nil when cohort is empty",
                                "field": "spec",
                            }
                        )
                        return causes
    if kind in ("ClusterQueue", "Cohort"):
        for i, group in enumerate(spec.get("resourceGroups") or []):
            covered = group.get("coveredResources") or []
            for flavor in group.get("flavors") or []:
                if len(flavor.get("resources") or []) != len(covered):
                    causes.append(
                        {
                            "reason": "FieldValueInvalid",
                            "message": "Invalid value: flavors must have the "
                            "same number of resources as the coveredResources",
                            "field": f"spec.resourceGroups[{i}]",
                        }
                    )
                    return causes
    return causes


@functools.cache
def definition(group: str, kind: str) -> dict[str, Any] | None:
    """The whole CustomResourceDefinition of a kind (its versions' schemas and printer
    columns), parsed once with libyaml when it is there."""
    name = FILES.get((group, kind))
    if name is None:
        return None
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    return dict(yaml.load((CRD_DIR / name).read_text(), Loader=loader))


def version(group: str, kind: str, name: str) -> dict[str, Any] | None:
    """One served version of a CRD (``schema``, ``additionalPrinterColumns``, …)."""
    found = definition(group, kind)
    for entry in (found or {}).get("spec", {}).get("versions", []):
        if entry["name"] == name:
            return dict(entry)
    return None


@functools.cache
def _deprecations(group: str, plural: str) -> dict[str, str]:
    """version -> the warning the API server sends for a deprecated version of a CRD."""
    out: dict[str, str] = {}
    for path in CRD_DIR.glob(f"*/{group}_{plural}.yaml"):
        crd = yaml.safe_load(path.read_text())
        kind = crd["spec"]["names"]["kind"]
        for entry in crd["spec"]["versions"]:
            if entry.get("deprecated"):
                out[entry["name"]] = entry.get("deprecationWarning") or (
                    f"{group}/{entry['name']} {kind} is deprecated"
                )
    return out


def deprecation_warning(path: str) -> str:
    """The ``Warning`` the API server adds to every request for a deprecated version of a
    custom resource (``/apis/<group>/<version>/[namespaces/<ns>/]<plural>...``), or ""."""
    parts = path.strip("/").split("/")
    if len(parts) < 4 or parts[0] != "apis" or "." not in parts[1]:
        return ""
    rest = parts[3:]
    if rest[0] == "namespaces" and len(rest) >= 3:
        rest = rest[2:]
    if not re.fullmatch(r"[a-z0-9.-]+", parts[1]) or not re.fullmatch(r"[a-z0-9]+", rest[0]):
        return ""
    return _deprecations(parts[1], rest[0]).get(parts[2], "")
