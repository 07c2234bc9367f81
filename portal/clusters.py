"""The foreign key every cluster-scoped row carries, and its default.

Namespaces, queues, node pools, observed objects, changes and usage belong to one cluster
(``cluster.Cluster``). The models sit below the loop's ``cluster`` app, so they name it by
string, and the default is found through the app registry rather than an import: the one
dependency that points up is the database's, never the code's. The default is the cluster
the settings connect to, so an installation from before there were several clusters, and
code that has not chosen one, keep meaning the one cluster they always meant.
"""

from __future__ import annotations

from typing import Any

from django.apps import apps
from django.conf import settings
from django.db import models


def settings_cluster_id() -> int:
    """The id of the cluster the settings connect to, made when missing (after a test
    database's flush, or before the first migration made it)."""
    clusters = apps.get_model("cluster", "Cluster").objects
    found = clusters.filter(connection="settings").values_list("pk", flat=True).first()
    if found is not None:
        return int(found)
    name = settings.QM_CLUSTER_NAME
    made = clusters.get_or_create(
        connection="settings",
        defaults={"name": name, "display_name": name.replace("-", " ").capitalize()},
    )[0]
    return int(made.pk)


def cluster_key(**options: Any) -> Any:
    """``cluster = cluster_key()``: the row's cluster (the settings' one unless given)."""
    return models.ForeignKey(
        "cluster.Cluster",
        on_delete=models.PROTECT,
        default=settings_cluster_id,
        help_text="The Kubernetes cluster this belongs to.",
        **options,
    )
