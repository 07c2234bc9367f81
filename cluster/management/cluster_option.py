"""The ``--cluster NAME`` option of the commands that act on one cluster (the loop's
``sync_cluster``, health's ``collect_gpu_health``)."""

from __future__ import annotations

from django.core.management.base import CommandError

from cluster.models import Cluster
from cluster.services import settings_cluster


def named_cluster(name: str | None) -> Cluster:
    """The cluster named ``name`` (none: the settings' one); CommandError when there is none."""
    if not name:
        return settings_cluster()
    cluster = Cluster.objects.filter(name=name).first()
    if cluster is None:
        known = ", ".join(Cluster.objects.order_by("name").values_list("name", flat=True))
        raise CommandError(f"No cluster named {name!r} (registered: {known}).")
    return cluster
