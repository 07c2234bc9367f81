"""What every page shows of the clusters: the cluster switcher's choice
(``portal.clusters.cluster_choice``) and how fresh each cluster's data is
(``cluster.selectors.cluster_statuses``), read only by the pages that draw them."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from django.utils.functional import SimpleLazyObject

from cluster.selectors import cluster_statuses
from portal.clusters import cluster_choice


def clusters(request: HttpRequest) -> dict[str, Any]:
    """``cluster_choice`` and ``cluster_statuses`` for the templates (signed-in users only;
    each read on its first use, so a fragment that shows neither costs no query)."""
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {}
    return {
        "cluster_choice": SimpleLazyObject(lambda: cluster_choice(request)),
        "cluster_statuses": SimpleLazyObject(cluster_statuses),
    }
