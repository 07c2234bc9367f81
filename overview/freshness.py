"""What every page shows of the clusters: the cluster switcher's choice
(``portal.clusters.cluster_choice``) and how fresh each cluster's data is
(``cluster.selectors.cluster_statuses``), read only by the pages that draw them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.http import HttpRequest
from django.utils.functional import SimpleLazyObject

from cluster.models import Cluster, SyncRun
from cluster.selectors import ApiStatus, ClusterStatus, api_status, cluster_statuses
from portal.clusters import cluster_choice


def statuses_of(request: HttpRequest, read: Sequence[SyncRun] | None = None) -> list[ClusterStatus]:
    """``cluster_statuses`` of the request's clusters (``cluster_choice``), read once per
    request (``read``: the recent polls, when the page read them already): the header, the
    banner and a page's sections share it."""
    found = getattr(request, "_cluster_statuses", None)
    if found is None:
        found = cluster_statuses(clusters=cluster_choice(request).clusters, read=read)
        request._cluster_statuses = found  # type: ignore[attr-defined]
    return list(found)


def settings_api_status(request: HttpRequest, read: Sequence[SyncRun] | None = None) -> ApiStatus:
    """``api_status()`` (the settings' cluster's) from the request's statuses (``read``: as
    ``statuses_of``)."""
    for status in statuses_of(request, read):
        if status.cluster.connection == Cluster.Connection.SETTINGS:
            return status.api
    return api_status()  # no settings' cluster registered: it is made, and never polled


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
