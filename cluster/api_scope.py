"""Cluster-scoped resources in the REST API.

Each has one canonical address per cluster, ``/api/v1/clusters/<cluster>/<resource>/…``,
and keeps its flat one, ``/api/v1/<resource>/…``, for the clients written before there
were several clusters: a flat list answers across clusters (``?cluster=<name>`` keeps
one), each item naming its ``cluster``; a flat detail by name answers the one object of
that name, and a 409 naming the clusters and their nested URLs when several clusters have
one; a flat create takes ``cluster`` (needed when there is more than one). The ``cluster``
of an object is never changed by a write.
"""

from __future__ import annotations

from typing import Any

import django_filters
from django import forms
from django.core.exceptions import ValidationError
from django.db.models import Model, QuerySet
from django.shortcuts import get_object_or_404
from django.urls import reverse
from drf_spectacular.utils import OpenApiParameter, extend_schema_field
from rest_framework import serializers
from rest_framework.exceptions import NotFound
from rest_framework.request import Request

from cluster.models import Cluster
from cluster.scope import visible_clusters
from portal.access.permissions import is_platform_admin
from portal.api.safety import StrictQuery
from portal.api.schema import CLUSTER_NAME
from portal.vocabulary.errors import DomainError

CLUSTER_QUERY = OpenApiParameter(
    "cluster",
    {"type": "string", "pattern": CLUSTER_NAME, "maxLength": 63},
    description="Only the rows of this cluster (its name); a name no cluster has is a 400 "
    "naming `cluster` and the clusters there are.",
)
CLUSTER_FIELD_HELP = "The name of the cluster it is on (`/api/v1/clusters/<cluster>/…`)."


def clusters() -> QuerySet[Cluster]:
    """Every cluster, by name: only what a name check needs."""
    return Cluster.objects.only("pk", "name").order_by("name")


def cluster_names() -> list[str]:
    return list(clusters().values_list("name", flat=True))


def known_cluster_names(user: Any) -> list[str]:
    """The clusters ``user`` may be told of by name: every one for platform admins and
    approvers (who decide every team's changes); the clusters their teams' namespaces are
    on for anyone else (the cluster list itself is the admins')."""
    return list(visible_clusters(user).values_list("name", flat=True))


def no_such_cluster(names: list[str]) -> str:
    """The one answer to a cluster name that no cluster has."""
    return f"No such cluster: use one of {', '.join(names)}." if names else "No such cluster."


class NoSuchCluster(NotFound):
    """A nested route's cluster that no cluster is, or one the caller may not see
    (``cluster.scope.visible_clusters``: answered the same, so that names cannot be
    probed): a 404 naming the clusters the caller may know of (``clusters``: what
    ``GET /api/v1/clusters/`` shows them, platform admins every one, others none)."""

    def __init__(self, name: str, user: Any) -> None:
        super().__init__(f"No cluster named '{name[:63]}'.")
        self.clusters = cluster_names() if is_platform_admin(user) else []


class ClusterChoiceField(forms.ModelChoiceField):  # type: ignore[type-arg]
    """A cluster's name; another is an error naming the clusters that would do (those the
    asking ``user`` may know of)."""

    user: Any = None

    def to_python(self, value: Any) -> Any:
        try:
            return super().to_python(value)
        except ValidationError:
            names = known_cluster_names(self.user)
            raise ValidationError(no_such_cluster(names), code="invalid_choice") from None


@extend_schema_field(
    {
        "type": "string",
        "pattern": CLUSTER_NAME,
        "maxLength": 63,
        "description": "Only the rows of this cluster (its name); a name no cluster has is a "
        "400 naming `cluster` and the clusters there are.",
    }
)
class ClusterFilter(django_filters.ModelChoiceFilter):
    """``?cluster=<name>`` on a flat list: the rows of that cluster only."""

    field_class = ClusterChoiceField

    def __init__(self, *, field_name: str = "cluster", **kwargs: Any) -> None:
        super().__init__(
            field_name=field_name,
            to_field_name="name",
            # A cluster the caller may not see is answered as one there is not.
            queryset=lambda request: visible_clusters(getattr(request, "user", None)),
            **kwargs,
        )

    @property
    def field(self) -> Any:
        field = super().field
        field.user = getattr(getattr(self.parent, "request", None), "user", None)
        return field


class ClusterQuery(StrictQuery):
    """``?cluster=<name>`` of a list that is no FilterSet's: the cluster, or a field error."""

    cluster = serializers.CharField(required=False, max_length=63)

    def validate_cluster(self, value: str) -> Any:
        found = visible_clusters(self.context.get("user")).filter(name=value).first()
        if found is None:
            names = known_cluster_names(self.context.get("user"))
            raise serializers.ValidationError(no_such_cluster(names))
        return found


def cluster_field(source: str | None = "cluster.name") -> serializers.CharField:
    """The read-only ``cluster`` of an item: its cluster's name (``source=None``: an item
    that is a dict with the name under ``cluster``)."""
    if source is None:
        return serializers.CharField(read_only=True, help_text=CLUSTER_FIELD_HELP)
    return serializers.CharField(source=source, read_only=True, help_text=CLUSTER_FIELD_HELP)


def cluster_input(kind: str) -> serializers.CharField:
    """The ``cluster`` a create takes (flat routes; on a nested one the path says it)."""
    return serializers.CharField(
        required=False,
        max_length=63,
        help_text=f"The cluster's name the {kind} is made on: needed when there are several "
        "clusters (the nested route's path says it); with one cluster, that one.",
    )


def unchanged_cluster(kind: str) -> serializers.CharField:
    """The ``cluster`` a write may repeat, never change."""
    return serializers.CharField(
        required=False,
        max_length=63,
        help_text=f"A {kind} stays on its cluster: its name may be repeated, another is a 400.",
    )


class ClusterScoped:
    """A viewset (or view) of rows that each belong to one cluster, served flat and nested.

    ``cluster_path`` is the lookup from the model to its cluster (``"cluster"``, or
    ``"namespace__cluster"`` for a LocalQueue); ``kind`` names the objects in messages. On
    a nested route the path's cluster (404 when no cluster has that name) keeps its rows
    only; on a flat one a detail by a name several clusters have is a 409 naming them.
    The path's cluster is looked up once the caller is authenticated and allowed, before
    the handler: every nested route answers an unknown one the same way."""

    cluster_path = "cluster"
    kind = "object"
    path_cluster_name: str | None = None
    request: Any
    kwargs: dict[str, Any]

    def dispatch(self, request: Any, *args: Any, **kwargs: Any) -> Any:
        self.path_cluster_name = kwargs.pop("cluster", None)
        return super().dispatch(request, *args, **kwargs)  # type: ignore[misc]

    def initial(self, request: Any, *args: Any, **kwargs: Any) -> None:
        super().initial(request, *args, **kwargs)  # type: ignore[misc]
        self.path_cluster()

    def path_cluster(self) -> Any:
        """The nested route's cluster (None on a flat route; :class:`NoSuchCluster` when
        no cluster the caller may see has the path's name)."""
        if self.path_cluster_name is None:
            return None
        if not hasattr(self, "_path_cluster"):
            seen = visible_clusters(self.request.user).only("pk", "name")
            found = seen.filter(name=self.path_cluster_name).first()
            if found is None:
                raise NoSuchCluster(self.path_cluster_name, self.request.user)
            self._path_cluster = found
        return self._path_cluster

    def in_cluster(self, queryset: QuerySet[Any]) -> QuerySet[Any]:
        """The rows of the path's cluster (on a flat route, of every cluster the caller may
        see: a subquery of the same statement, no round trip more)."""
        cluster = self.path_cluster()
        if cluster is None:
            seen = visible_clusters(self.request.user).values("pk")
            return queryset.filter(**{f"{self.cluster_path}__in": seen})
        return queryset.filter(**{self.cluster_path: cluster})

    def filter_queryset(self, queryset: QuerySet[Any]) -> QuerySet[Any]:
        return self.in_cluster(super().filter_queryset(queryset))  # type: ignore[misc]

    def get_object(self) -> Any:
        lookup = getattr(self, "lookup_field", "pk")
        if self.path_cluster_name is None and lookup != "pk":
            value = self.kwargs[getattr(self, "lookup_url_kwarg", None) or lookup]
            rows = self.filter_queryset(self.get_queryset())  # type: ignore[attr-defined]
            found = sorted(
                set(
                    rows.filter(**{lookup: value})
                    .order_by()
                    .values_list(f"{self.cluster_path}__name", flat=True)
                )
            )
            if len(found) > 1:
                message = ambiguous(self.request, self.kind, str(value), found)
                raise DomainError(message, code="ambiguous")
        return super().get_object()  # type: ignore[misc]

    def one_named(self, rows: QuerySet[Any], name: str, kind: str = "") -> Any:
        """The one row of ``rows`` named ``name`` on the path's cluster, or on any: 404
        when none, 409 naming the clusters when several have one."""
        rows = self.in_cluster(rows.filter(name=name))
        on = sorted(set(rows.order_by().values_list(f"{self.cluster_path}__name", flat=True)))
        if len(on) > 1:
            message = ambiguous(self.request, kind or self.kind, name, on)
            raise DomainError(message, code="ambiguous")
        return get_object_or_404(rows)

    def asked_cluster(self, query: Any) -> Any:
        """The cluster a list that is no FilterSet's keeps: the path's, else ``?cluster=``
        (``query`` is a :class:`ClusterQuery`, validated), else None: every cluster."""
        return self.path_cluster() or query.validated_data.get("cluster")

    def chosen_cluster(self, name: str | None) -> Any:
        """The cluster a create is for: the nested route's (a ``cluster`` in the body must
        be the same), else the one named, else the only one there is."""
        nested = self.path_cluster()
        if nested is not None:
            if name not in (None, nested.name):
                raise ValidationError(
                    {"cluster": [f"The path says cluster {nested.name}; leave cluster out."]}
                )
            return nested
        if name is None:
            if clusters().count() == 1:
                return clusters().get()
            names = known_cluster_names(self.request.user)
            listed = f": {', '.join(names)}" if names else ""
            raise ValidationError({"cluster": [f"Choose the cluster{listed}."]})
        found = clusters().filter(name=name).first()
        if found is None:
            raise ValidationError(
                {"cluster": [no_such_cluster(known_cluster_names(self.request.user))]}
            )
        return found


def ambiguous(request: Request, kind: str, name: str, names: list[str]) -> str:
    """What a flat address that names an object on several clusters answers: the clusters,
    and the nested URL of each."""
    root = reverse("api-root")
    rest = request.get_full_path().removeprefix(root)
    urls = " or ".join(f"{root}clusters/{cluster}/{rest}" for cluster in names)
    return (
        f"The clusters {', '.join(names)} each have a {kind} {name}: use the address with "
        f"its cluster, {urls}."
    )


def keep_cluster(obj: Model, kind: str, values: dict[str, Any], current: str) -> None:
    """Refuse a write whose ``cluster`` is not the object's own (it cannot move)."""
    name = values.get("cluster")
    if name is not None and name != current:
        raise ValidationError(
            {
                "cluster": [
                    f"The {kind} {getattr(obj, 'name', obj.pk)} is on cluster {current}; "
                    "its cluster cannot be changed."
                ]
            }
        )


def already_there(cluster: Any, kind: str, name: str) -> str:
    """The uniqueness error of a name taken on its cluster."""
    return f"The cluster {cluster.name} already has a {kind} {name}."
