"""What every page shows of the clusters: the cluster switcher's choice
(``cluster.scope.cluster_choice``) and how fresh each cluster's data is
(``cluster.selectors.statuses_of``), read only by the pages that draw them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.http import HttpRequest
from django.utils.functional import SimpleLazyObject

from cluster.models import Cluster, SyncRun
from cluster.scope import cluster_choice, settings_cluster
from cluster.selectors import ApiStatus, api_status, statuses_of


def settings_api_status(request: HttpRequest, read: Sequence[SyncRun] | None = None) -> ApiStatus:
    """``api_status(settings_cluster())`` from the request's statuses (``read``: as
    ``statuses_of``)."""
    for status in statuses_of(request, read):
        if status.cluster.connection == Cluster.Connection.SETTINGS:
            return status.api
    # no settings' cluster registered: it is made, and never polled
    return api_status(settings_cluster())


def clusters(request: HttpRequest) -> dict[str, Any]:
    """``cluster_choice`` and ``cluster_statuses`` for the templates (signed-in users only;
    each read on its first use, so a fragment that shows neither costs no query)."""
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {}
    return {
        "cluster_choice": SimpleLazyObject(lambda: cluster_choice(request)),
        "cluster_statuses": SimpleLazyObject(lambda: statuses_of(request)),
    }
