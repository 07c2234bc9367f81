"""Validate rendered objects the way an API server would see them.

Core kinds: the Kubernetes 1.36 OpenAPI schemas in strict mode (unknown fields refused).
Kueue / Volcano kinds: the vendored CRD schemas, closed, with ``metadata`` checked as core
ObjectMeta. CRD schemas are *structural*: an API server prunes unknown fields instead of
refusing them, so a misspelt field would vanish silently. Here every object schema that
lists its properties is closed (``additionalProperties: false``) unless it explicitly
preserves unknown fields, so a typo fails validation instead. CEL rules
(``x-kubernetes-validations``) are not evaluated here; :mod:`queues.rules` mirrors them.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import yaml

KUBERNETES_VERSION = "1.36.0"

CRD_DIR = Path(__file__).resolve().parent.parent / "reference" / "crds"
_FILES = {
    ("kueue.x-k8s.io", "ClusterQueue"): "kueue/kueue.x-k8s.io_clusterqueues.yaml",
    ("kueue.x-k8s.io", "LocalQueue"): "kueue/kueue.x-k8s.io_localqueues.yaml",
    ("kueue.x-k8s.io", "ResourceFlavor"): "kueue/kueue.x-k8s.io_resourceflavors.yaml",
    ("kueue.x-k8s.io", "Cohort"): "kueue/kueue.x-k8s.io_cohorts.yaml",
    ("scheduling.volcano.sh", "Queue"): "volcano/scheduling.volcano.sh_queues.yaml",
}


def _close(schema: Any) -> Any:
    """A copy of a structural schema in which unknown properties are refused."""
    if isinstance(schema, list):
        return [_close(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    closed = {key: _close(value) for key, value in schema.items()}
    if (
        "properties" in closed
        and "additionalProperties" not in closed
        and not closed.get("x-kubernetes-preserve-unknown-fields")
    ):
        closed["additionalProperties"] = False
    return closed


@functools.cache
def crd_schema(group: str, kind: str, version: str) -> dict[str, Any]:
    """The closed OpenAPI v3 schema of one CRD version."""
    crd = yaml.safe_load((CRD_DIR / _FILES[(group, kind)]).read_text())
    for entry in crd["spec"]["versions"]:
        if entry["name"] == version:
            schema = _close(entry["schema"]["openAPIV3Schema"])
            # metadata is only `type: object` in a CRD; it is checked as core ObjectMeta.
            schema["properties"]["metadata"] = {"type": "object"}
            return schema
    raise KeyError(f"{kind}.{group} has no version {version}")


def is_crd_kind(manifest: dict[str, Any]) -> bool:
    group = manifest["apiVersion"].rpartition("/")[0]
    return (group, manifest["kind"]) in _FILES


def crd_errors(manifest: dict[str, Any]) -> list[str]:
    """Schema errors of a rendered CRD object, as ``path: message`` lines (empty if valid)."""
    group, _, version = manifest["apiVersion"].rpartition("/")
    schema = crd_schema(group, manifest["kind"], version)
    validator = jsonschema.Draft202012Validator(schema)
    return [
        f"{'.'.join(str(p) for p in error.absolute_path) or '(root)'}: {error.message}"
        for error in sorted(validator.iter_errors(manifest), key=lambda e: list(map(str, e.path)))
    ]


def _core_errors(manifest: dict[str, Any]) -> list[str]:
    try:
        kubernetes_validate.validate(manifest, KUBERNETES_VERSION, strict=True)
    except kubernetes_validate.ValidationError as error:
        return [f"{'.'.join(map(str, error.path))}: {error.message}"]
    return []


def schema_errors(manifest: dict[str, Any]) -> list[str]:
    if is_crd_kind(manifest):
        wrapper = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": manifest["metadata"]}
        return crd_errors(manifest) + [f"metadata: {e}" for e in _core_errors(wrapper)]
    return _core_errors(manifest)
