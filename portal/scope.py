"""The cluster scope as a type: every cluster-scoped or observed model's queryset says which
cluster it reads, as NetBox's querysets say whom they are restricted to.

``ObservedNode.objects.on(cluster)`` reads one cluster's rows (a ``cluster.Cluster`` or its
id); ``.on_every_cluster()`` says, where it is meant (the loop's fan-out, the admin, a page
that shows every cluster), that the read spans them all. There is no third way: ``None`` is
refused rather than read as "the settings' cluster" or as "every cluster", which meant one
in some places and the other elsewhere. Code that means the settings' cluster says so with
``cluster.scope.settings_cluster_id()``. ``tests/unit/test_architecture.py`` refuses a
read of an observed model that starts with neither.
"""

from __future__ import annotations

from typing import Any, Self, TypeVar

from django.db import models

_M = TypeVar("_M", bound=models.Model)


def cluster_id_of(cluster: Any) -> int:
    """The id of ``cluster``: a ``cluster.Cluster`` (anything with a ``pk``) or an id. None
    is refused: the caller says which cluster it means."""
    if cluster is None:
        raise TypeError("no cluster given: name one, or read .on_every_cluster()")
    if isinstance(cluster, int):
        return cluster
    return int(cluster.pk)


class ScopedQuerySet(models.QuerySet[_M]):
    """A cluster-scoped model's rows, read on one cluster or, said out loud, on every one."""

    def on(self, cluster: Any) -> Self:
        """The rows of ``cluster`` (a ``cluster.Cluster`` or its id)."""
        return self.filter(cluster_id=cluster_id_of(cluster))

    def on_every_cluster(self) -> Self:
        """The rows of every cluster: for the loop's fan-out, the admin and the pages that
        show every cluster at once."""
        return self.all()


class ScopedManager(models.Manager[_M]):
    """The manager of a cluster-scoped model: ``.on(cluster)`` or ``.on_every_cluster()``."""

    def get_queryset(self) -> ScopedQuerySet[_M]:
        return ScopedQuerySet(self.model, using=self._db)

    def on(self, cluster: Any) -> ScopedQuerySet[_M]:
        """The rows of ``cluster`` (a ``cluster.Cluster`` or its id)."""
        return self.get_queryset().on(cluster)

    def on_every_cluster(self) -> ScopedQuerySet[_M]:
        """The rows of every cluster, said out loud."""
        return self.get_queryset().on_every_cluster()
