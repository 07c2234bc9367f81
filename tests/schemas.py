"""Validate rendered objects the way an API server would see them.

Core kinds: the Kubernetes 1.36 OpenAPI schemas in strict mode (unknown fields refused).
Kueue / Volcano kinds: the vendored CRD schemas, closed (see ``queues.schemas``), with
``metadata`` checked as core ObjectMeta.
"""

from __future__ import annotations

from typing import Any

import kubernetes_validate

from queues.schemas import crd_errors, is_crd_kind

KUBERNETES_VERSION = "1.36.0"


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
