"""Reads of tenant data, always scoped to the acting user."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.contrib.postgres.expressions import ArraySubquery
from django.db.models import Count, OuterRef, Prefetch, QuerySet
from django.db.models.functions import JSONObject

from cluster.decode import claim_requests
from cluster.models import ObservedObject
from portal import removal
from portal.access.permissions import is_platform_admin, sees_every_team, user_id
from portal.api.safety import etag_of
from tenants import mig_policy
from tenants.models import LimitRangeItem, Membership, Namespace, PriorityClass, QuotaItem, Team

# What a namespace delete does, said the same way by the confirmation page and the API.
NAMESPACE_DELETE_SAYS = (
    "Deleting a namespace removes the portal's objects in it from the cluster (its "
    "ResourceQuota, LimitRange and LocalQueues) and the namespace itself, with everything in "
    "it, when the portal created it. Its quota requests and audit events stay in the history."
)


def _items_of(model: Any, fields: tuple[str, ...]) -> ArraySubquery:
    """The items of ``model`` in the outer namespace, each its ``fields`` as JSON, in the
    model's order within a namespace (its ordering less the namespace)."""
    order = [f for f in model._meta.ordering if f != "namespace"]
    rows = model.objects.filter(namespace=OuterRef("pk")).order_by(*order)
    return ArraySubquery(rows.values(row=JSONObject(**{f: f for f in fields})))


def with_items(namespaces: QuerySet[Namespace]) -> QuerySet[Namespace]:
    """``namespaces`` each with its ResourceQuota items (``quota_rows``) and LimitRange items
    (``limit_rows``) read in the same statement, not in a prefetch query each: a page of the
    API's namespaces is one query (``tenants.api.NamespaceSerializer`` reads either)."""
    return namespaces.annotate(
        quota_rows=_items_of(QuotaItem, ("resource", "hard")),
        limit_rows=_items_of(
            LimitRangeItem,
            ("limit_type", "resource", "default", "default_request", "max", "min"),
        ),
    )


def list_teams_for_user(user: AbstractBaseUser | AnonymousUser) -> QuerySet[Team]:
    """Teams the user belongs to (every team for a platform admin), with what a page shows.

    A fixed number of queries whatever the number of teams, namespaces or queues.
    """
    if not user.is_authenticated:
        return Team.objects.none()
    teams = Team.objects.all()
    if not is_platform_admin(user):
        teams = teams.filter(memberships__user_id=user.pk)
    return teams.prefetch_related(
        Prefetch(
            "namespaces",
            queryset=Namespace.objects.prefetch_related(
                "quota_items", "limit_items", "local_queues__cluster_queue"
            ),
        ),
        "allowed_priority_classes",
    ).order_by("slug")


def namespace_etag(ns: Namespace) -> str:
    """The namespace's version: its row, quota and limits (the API's ETag, the delete
    page's hidden version)."""
    return etag_of(
        ns.pk,
        ns.team_id,
        ns.description,
        sorted((i.resource, i.hard) for i in ns.quota_items.all()),
        sorted(sorted(i.spec().__dict__.items()) for i in ns.limit_items.all()),
    )


@dataclass(frozen=True)
class NamespaceDeletion:
    """What deleting a namespace means: the one sentence, then what leaves (or stays in) the
    cluster and what history stays, object by object; ``version`` is what was read."""

    name: str
    version: str
    summary: str
    cluster: list[str]
    history: list[str]


def namespace_deletion(ns: Namespace) -> NamespaceDeletion:
    """What deleting ``ns`` would do now, from the apps that know (the cluster loop, the
    requests)."""
    said = removal.explain(ns)
    return NamespaceDeletion(
        name=ns.name,
        version=namespace_etag(ns),
        summary=NAMESPACE_DELETE_SAYS,
        cluster=said.cluster,
        history=[*said.history, "The audit log keeps every event about the namespace."],
    )


def priority_classes_for(user: AbstractBaseUser | AnonymousUser) -> list[PriorityClass]:
    """The PriorityClass catalog, highest first, each with the teams allowed to use it as
    the user may see them: ``shown_teams``, the slugs of every team for platform admins
    and approvers, of the user's own teams for anyone else (another team's name never
    reaches them), in the teams' order; ``other_teams``, how many more are allowed. Two
    queries, the teams read as slugs (a thousand teams are no thousand models)."""
    classes: list[Any] = list(
        PriorityClass.objects.annotate(allowed=Count("teams")).order_by("-value")
    )
    through = Team.allowed_priority_classes.through.objects.order_by("team__slug")
    if not sees_every_team(user):
        mine = Membership.objects.filter(user_id=user_id(user)).values("team_id")
        through = through.filter(team_id__in=mine)
    shown: dict[int, list[str]] = {}
    for pk, slug in through.values_list("priorityclass_id", "team__slug"):
        shown.setdefault(pk, []).append(slug)
    for pc in classes:
        pc.shown_teams = shown.get(pc.pk, [])
        pc.other_teams = pc.allowed - len(pc.shown_teams)
    return classes


def claim_templates_ask(cluster_id: int, namespaces: list[str]) -> dict[tuple[str, str], list[str]]:
    """(namespace, ResourceClaimTemplate) -> the device classes its claim asks for, as the
    last poll of cluster ``cluster_id`` read the templates of ``namespaces`` (one query,
    none without a namespace): what a pod waiting for a claim made from it waits for."""
    if not namespaces:
        return {}
    rows = (
        ObservedObject.objects.on(cluster_id)
        .filter(kind="ResourceClaimTemplate", namespace__in=namespaces)
        .values_list("namespace", "name", "spec")
    )
    return {
        (namespace, name): sorted(
            mig_policy.claim_devices(
                claim_requests(((spec or {}).get("spec") or {}).get("spec") or {})
            )
        )
        for namespace, name, spec in rows
    }
