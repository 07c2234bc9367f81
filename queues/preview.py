"""What an edit does to the rendered objects: the manifest before and after, as a YAML
diff (pure, apart from reading the namespaces a ClusterQueue serves)."""

from __future__ import annotations

import difflib
import hashlib
from typing import Any

import yaml
from django.conf import settings

from queues import manifests
from queues.models import ClusterQueue, LocalQueue


def cluster_queue_manifest(cq: ClusterQueue) -> dict[str, Any]:
    """The object the cluster loop would apply for this ClusterQueue (the configured backend)."""
    if settings.QM_QUEUE_BACKEND == "volcano":
        return manifests.render_volcano_queue(cq, has_cohort=cq.cohort_id is not None)
    namespaces = (
        LocalQueue.objects.filter(cluster_queue_id=cq.pk).values_list("namespace__name", flat=True)
        if cq.pk
        else []
    )
    return manifests.render_cluster_queue(
        cq,
        cohort_name=cq.cohort.name if cq.cohort is not None else None,
        namespaces=list(namespaces),
        version=settings.QM_KUEUE_API_VERSION,
    )


def as_yaml(manifest: dict[str, Any] | None) -> str:
    return yaml.safe_dump(manifest, sort_keys=False, default_flow_style=False) if manifest else ""


def digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def yaml_diff(before: str, after: str) -> list[tuple[str, str]]:
    """Unified diff lines as (kind, text): kind is "+", "-", " " or "@" (a hunk header)."""
    lines = []
    for line in difflib.unified_diff(
        before.splitlines(), after.splitlines(), "applied now", "after saving", lineterm="", n=3
    ):
        if line.startswith(("---", "+++")):
            continue
        kind = "@" if line.startswith("@@") else line[:1]
        lines.append((kind, line[1:] if kind != "@" else line))
    return lines
