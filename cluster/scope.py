"""The foreign key every cluster-scoped row carries, its default, and the scope as a type.

Namespaces, queues, node pools, observed objects, changes and usage belong to one cluster
(``cluster.Cluster``). The cluster app's own models carry this key too (``cluster.models``
imports this module), so the model is named by string and found through the app registry
here rather than imported, which would be a circle. The default is the cluster
the settings connect to, so an installation from before there were several clusters, and
code that has not chosen one, keep meaning the one cluster they always meant.

The scope is a type, as NetBox's querysets say whom they are restricted to:
``ObservedNode.objects.on(cluster)`` reads one cluster's rows (a ``cluster.Cluster`` or its
id); ``.on_every_cluster()`` says, where it is meant (the loop's fan-out, the admin, a page
that shows every cluster), that the read spans them all. There is no third way: ``None`` is
refused rather than read as "the settings' cluster" or as "every cluster", which meant one
in some places and the other elsewhere. Code that means the settings' cluster says so with
:func:`settings_cluster_id`. ``tests/unit/test_scope.py`` refuses a read of an observed
model that starts with neither.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Self, TypeVar

from django.apps import apps
from django.conf import settings
from django.db import models
from django.http import HttpRequest

from portal.infra.process_cache import ProcessCache
from portal.infra.round_trips import Read, queryset_read, read_together


def settings_cluster_of(clusters: Any) -> Any:
    """The settings' cluster among ``clusters`` (a manager or queryset of ``cluster.Cluster``
    or of its state in a migration), made when missing: the one reader of that row, for the
    code, the migrations and after a ``flush`` (one query when it is there)."""
    found = clusters.filter(connection="settings").first()
    if found is not None:
        return found
    name = settings.QM_CLUSTER_NAME
    return clusters.get_or_create(
        connection="settings",
        defaults={
            "name": name,
            "display_name": name.replace("-", " ").capitalize(),
            "purpose": "general",
        },
    )[0]


def settings_cluster() -> Any:
    """The cluster the portal's settings connect to (KUBE_URL / KUBECONFIG /
    KUBE_IN_CLUSTER), named ``QM_CLUSTER_NAME``: a ``cluster.Cluster``, made when missing
    (the migration makes it for an existing installation; a database emptied by hand gets
    it back)."""
    return settings_cluster_of(apps.get_model("cluster", "Cluster").objects)


def settings_cluster_id() -> int:
    """The id of the settings' cluster (every cluster key's default), the row read for its
    key only."""
    return int(settings_cluster_of(apps.get_model("cluster", "Cluster").objects.only("pk")).pk)


def cluster_key(**options: Any) -> Any:
    """``cluster = cluster_key()``: the row's cluster (the settings' one unless given)."""
    return models.ForeignKey(
        "cluster.Cluster",
        on_delete=models.PROTECT,
        default=settings_cluster_id,
        help_text="The Kubernetes cluster this belongs to.",
        **options,
    )


SESSION_KEY = "qm_cluster"  # the cluster the pages show, by name ("": every cluster)
EVERY_CLUSTER = "all"  # ``?cluster=all``: every cluster


@dataclass(frozen=True)
class ClusterChoice:
    """Which cluster the pages show: ``?cluster=<name>`` chooses it (``all``: every one),
    the session keeps it. ``chosen`` is None for every cluster; with one cluster it is
    always that one. ``error`` says why a name asked for was not taken."""

    clusters: tuple[Any, ...]  # every cluster the user may see (``cluster.Cluster``), by name
    chosen: Any | None
    error: str = ""

    @property
    def several(self) -> bool:
        """Whether there is a choice to make (the switcher is shown only then)."""
        return len(self.clusters) > 1

    @property
    def shown(self) -> list[Any]:
        """The clusters a page shows: the chosen one, or every one the user may see."""
        return [self.chosen] if self.chosen is not None else list(self.clusters)

    @property
    def value(self) -> str:
        """The switcher's value: the chosen cluster's name, or ``all``."""
        return self.chosen.name if self.chosen is not None else EVERY_CLUSTER


def visible_clusters(user: Any) -> models.QuerySet[Any]:
    """The clusters ``user`` may see, by name: every one for platform admins and approvers
    (who see every team), the clusters their teams' namespaces are on for anyone else, none
    for an anonymous user. One query (the roles asked in it, unless the request knows
    them). A cluster left out is answered as one that does not exist."""
    # lazy: the permissions load the auth models, and ``cluster.apps`` imports this module
    # before the app registry is ready.
    from portal.access.permissions import sees_every_team_known, sees_every_team_sql

    model = apps.get_model("cluster", "Cluster")
    rows = model.objects.order_by("name")
    if user is None or not user.is_authenticated:
        return rows.filter(pk__isnull=True)
    everyone = sees_every_team_known(user)
    if everyone:
        return rows
    theirs = models.Q(
        pk__in=model.objects.filter(namespaces__team__memberships__user_id=user.pk).values("pk")
    )
    if everyone is None:
        theirs |= models.Q(sees_every_team_sql(user))
    return rows.filter(theirs)


# Each user's ``clusters_read``, compiled once in this process: its SQL and parameters come
# from the user's id and whether the request knows the user sees every team, nothing else
# (the query builder took about 1.5 ms a page, more than the query).
_CLUSTERS_READ: ProcessCache[tuple[Any, ...], Read] = ProcessCache("the clusters users see", 1024)


def clusters_read(user: Any) -> Read:
    """The clusters ``user`` may see (``visible_clusters``), their credential left out, as
    ``cluster_choice`` reads them: for a page that reads them with others in one round trip
    (``cluster_choice(request, rows)``)."""
    from portal.access.permissions import sees_every_team_known  # lazy: as visible_clusters

    if user is None or not user.is_authenticated:
        key: tuple[Any, ...] = ("anonymous",)
    else:
        key = (user.pk, sees_every_team_known(user))
    return _CLUSTERS_READ.get(
        key, lambda: queryset_read(visible_clusters(user).defer("credential"))
    )


def cluster_choice(request: HttpRequest, read: Sequence[Any] | None = None) -> ClusterChoice:
    """The request's cluster choice among the clusters its user may see (one query, once
    per request; none when the page read the clusters already: ``read``, the rows of
    ``clusters_read``): a known name in ``?cluster=`` is taken and kept in the session; an
    unknown one, or one the user may not see, changes nothing and is told in ``error``
    (the same words for both)."""
    found = getattr(request, "_cluster_choice", None)
    if isinstance(found, ClusterChoice):
        return found
    user = getattr(request, "user", None)
    clusters = tuple(read_together(clusters_read(user))[0] if read is None else read)
    by_name = {c.name: c for c in clusters}
    session = getattr(request, "session", None)
    kept = session.get(SESSION_KEY, "") if session is not None else ""
    asked = request.GET.get("cluster")
    error = ""
    if asked is not None:
        asked = asked.strip()
        if asked in ("", EVERY_CLUSTER) or asked in by_name:
            kept = "" if asked == EVERY_CLUSTER else asked
            if session is not None:
                session[SESSION_KEY] = kept
        else:
            error = f"There is no cluster named “{asked[:63]}”."
    chosen = by_name.get(kept)
    if len(clusters) == 1:
        chosen = clusters[0]
    choice = ClusterChoice(clusters, chosen, error)
    request._cluster_choice = choice  # type: ignore[attr-defined]
    return choice


def chosen_cluster(request: HttpRequest) -> Any | None:
    """The cluster the pages show (``cluster.Cluster``), or None for every cluster."""
    return cluster_choice(request).chosen


def unique_per_cluster(name: str, what: str) -> models.UniqueConstraint:
    """A name unique on its cluster, as Kubernetes makes it (another cluster may have it)."""
    return models.UniqueConstraint(
        fields=["cluster", "name"],
        name=name,
        violation_error_message=f"The cluster already has a {what} of this name.",
    )


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
