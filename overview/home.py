"""A team lead's home: how much the team uses (each quota item as used of hard, each
LocalQueue's workloads and its ClusterQueue's use and borrowing), of what and what runs (GPU
pods and admitted workloads, since when and where, those new since the last visit marked),
and what waits and why, one card per problem. Every number on it is read in one query of the
observed objects, so the sentences and the bars count from the same poll."""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from django.contrib.auth.decorators import login_required
from django.db.models import Q
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone

from budgets.rows import budget_rows_of_teams
from budgets.selectors import budgets_read
from changes.models import OPEN_STATES, MigChangeRequest, QuotaChangeRequest
from cluster.models import ObservedCreateFailure, ObservedPod, ObservedWorkload
from cluster.scope import cluster_choice, cluster_id_of
from cluster.selectors import first_reads
from diagnostics.selectors import WaitingRead, explain_waiting
from overview.freshness import settings_api_status
from overview.selectors import (
    HIT_RECENTLY,
    Statuses,
    home_observed_from,
    home_observed_reads,
    home_queues,
    home_visit_read,
    trees_read,
)
from portal.access.permissions import sees_every_team, user_id
from portal.infra.process_cache import ProcessCache
from portal.infra.round_trips import read_together
from portal.vocabulary.names import PodNames
from portal.vocabulary.quantity import QuantityError, format_quantity, parse_quantity
from queues.selectors import quota_rows, teams_from, teams_read
from tenants.models import Team

GPU_PREFIX = "nvidia.com/"


@dataclass
class Running:
    """One piece of the team's running GPU work: an admitted workload (with where its pods
    run) or a GPU pod that runs for no admitted workload."""

    kind: str  # "Workload" or "Pod"
    name: str
    holds: dict[str, int]  # GPU resource -> count
    since: dt.datetime | None
    nodes: list[str] = field(default_factory=list)
    queue: str = ""
    pods: int = 0
    new: bool = False  # started after the user's last visit
    claims: int = 0  # its DRA claims (a pod's devices by DRA, shown on its node's page)


NAMES_SHOWN = 20  # of pending pods that wait alike, the names a card lists


@dataclass
class PodsAlike:
    """Pending pods of one namespace that wait for the same reason, with the same estimate:
    one card that names them (the first NAMES_SHOWN, the others counted), not one each."""

    pods: list[ObservedPod]

    @property
    def first(self) -> ObservedPod:
        return self.pods[0]

    @property
    def why(self) -> Any:
        return self.pods[0].why  # type: ignore[attr-defined]

    @property
    def estimate(self) -> Any:
        return getattr(self.pods[0], "estimate", None)

    @property
    def shown(self) -> list[ObservedPod]:
        return self.pods[:NAMES_SHOWN]

    @property
    def more(self) -> int:
        return max(0, len(self.pods) - NAMES_SHOWN)


def _alike(pods: list[ObservedPod]) -> list[PodsAlike]:
    """The pods grouped by what their cards would say, in the order of each group's first."""
    groups: dict[tuple[Any, ...], PodsAlike] = {}
    for pod in pods:
        key = (pod.why.key(), getattr(pod, "estimate", None))  # type: ignore[attr-defined]
        groups.setdefault(key, PodsAlike([])).pods.append(pod)
    return list(groups.values())


# (flavor, resource) -> what the rest of a queue's cohort tree lends at most (``_lendable``)
Lendable = dict[tuple[str, str], Fraction]
# each ClusterQueue's, under the version of the cohort trees read in the page's first round
# trip (``trees_read``) and the queue
_LENDABLE: ProcessCache[tuple[tuple[Any, ...], tuple[int, str]], Lendable] = ProcessCache(
    "what cohort trees lend", 1024
)


@login_required
def home(request: HttpRequest) -> HttpResponse:
    """The signed-in user's teams: what they use, what runs, and what waits and why, each
    team's namespaces grouped by cluster. Two round trips to the database besides the
    session's: what the user is set up with (teams, clusters, their polls), then what was
    observed of it, with the visit recorded."""
    mine = teams_read(request.user)
    team_rows = first_reads(request, *([mine, trees_read()] if mine is not None else []))
    teams = teams_from(team_rows[0]) if team_rows else []
    clusters = {c.pk: c for c in cluster_choice(request).clusters}
    api = settings_api_status(request)
    namespaces = [ns for team in teams for ns in team.namespaces.all()]
    trees = tuple(team_rows[1][0]) if team_rows else ()
    queues = home_queues(namespaces)
    kept = _LENDABLE.found((trees, queue) for queue in queues)
    missing = [queue for queue in queues if (trees, queue) not in kept]
    visit, budgets_of_teams, *observed = read_together(
        home_visit_read(user_id(request.user), api, teams),
        budgets_read(teams),
        *home_observed_reads(namespaces, missing),
    )
    last_visit, any_grant, any_hit = visit[0]
    statuses, pods, lenders, waiting = home_observed_from(observed)
    lendable = {queue: _lendable(lenders.get(queue, [])) for queue in missing}
    _LENDABLE.keep({(trees, queue): lent for queue, lent in lendable.items()})
    lendable.update({queue: lent for (_, queue), lent in kept.items()})
    on_cluster: dict[int, list[Any]] = defaultdict(list)
    for ns in namespaces:
        on_cluster[cluster_id_of(ns.cluster_id)].append(ns)
    # the user's own teams' pods are named, another's only to those who see every team
    names = PodNames(
        sees_every_team(request.user),
        frozenset((cluster_id_of(ns.cluster_id), ns.name) for ns in namespaces),
    )
    for cluster_id, group in on_cluster.items():
        here = [p for p in pods if p.cluster_id == cluster_id]
        read = waiting.on(cluster_id)
        _observe(cluster_id, group, (here, read, names), last_visit)
    for ns in namespaces:  # each one's cluster, read once for all (links name it)
        if ns.cluster_id in clusters:
            ns.cluster = clusters[ns.cluster_id]
    for team in teams:
        team.by_cluster = _by_cluster(team, clusters)  # type: ignore[attr-defined]
    _quota_use(namespaces, statuses)
    _queue_use(namespaces, statuses, lendable)
    grants = _grants(teams) if any_grant else defaultdict(list)
    hits = _changes_hitting(teams) if any_hit else defaultdict(list)
    budgets = budget_rows_of_teams(teams, budgets_of_teams)
    for team in teams:
        team.grants = grants[team.pk]  # type: ignore[attr-defined]
        team.hits = hits[team.pk]  # type: ignore[attr-defined]
        team.budget_row = budgets.get(team.pk)  # type: ignore[attr-defined]
    context = {
        "teams": teams,
        "sync": api.latest,
        "api": api,
        "last_visit": last_visit,
        "several": len(clusters) > 1,
    }
    return render(request, "overview/home.html", context)


def _observe(
    cluster_id: int,
    namespaces: list[Any],
    observed: tuple[list[ObservedPod], WaitingRead, PodNames],
    last_visit: dt.datetime | None,
) -> None:
    """Each namespace of one cluster with ``observed``: what runs there and what waits
    (``observed``: the cluster's pods and what waits there as read, and whose pods the
    user may see by name)."""
    pods, read, names = observed
    running = [p for p in pods if p.phase == "Running"]
    waiting = [p for p in pods if p.phase == "Pending"]
    workloads, pending, failures = explain_waiting(
        [ns.name for ns in namespaces], cluster_id=cluster_id, names=names, pods=waiting, read=read
    )
    per_namespace = _sorted_out(workloads, pending, failures, running, last_visit)
    for ns in namespaces:
        ns.observed = per_namespace[ns.name]


def _by_cluster(team: Team, clusters: dict[Any, Any]) -> list[tuple[Any, list[Any]]]:
    """The team's namespaces per cluster, the clusters by name (none without a namespace)."""
    groups: dict[int | None, list[Any]] = defaultdict(list)
    for ns in team.namespaces.all():
        groups[ns.cluster_id].append(ns)
    named = sorted(groups, key=lambda pk: clusters[pk].name if pk in clusters else "")
    return [(clusters.get(pk), groups[pk]) for pk in named]


def _gpu_part(requests: dict[str, Any]) -> dict[str, int]:
    return {k: int(v) for k, v in requests.items() if k.startswith(GPU_PREFIX) and int(v)}


def _is_new(since: dt.datetime | None, last_visit: dt.datetime | None) -> bool:
    """Whether work started after the last visit. The cluster's times have whole seconds:
    one that started in the second of the visit's poll counts as new (twice at worst)."""
    return bool(since and last_visit and since >= last_visit.replace(microsecond=0))


def _running(
    workloads: Iterable[ObservedWorkload],
    pods: Iterable[ObservedPod],
    last_visit: dt.datetime | None,
) -> list[Running]:
    """Admitted workloads with the nodes their running pods are on, then the running GPU pods
    of no admitted workload; newest first."""
    items = {
        w.name: Running(
            "Workload",
            w.name,
            _gpu_part(w.requests),
            w.admitted_at,
            queue=w.queue_name,
            new=_is_new(w.admitted_at, last_visit),
        )
        for w in workloads
    }
    alone = []
    for pod in pods:
        item = items.get(pod.workload_name)
        if item is not None:
            item.pods += 1
            if pod.node_name and pod.node_name not in item.nodes:
                item.nodes.append(pod.node_name)
            continue
        since = pod.started_at or pod.created_at
        alone.append(
            Running(
                "Pod",
                pod.name,
                _gpu_part(pod.gpu_requests),
                since,
                nodes=[pod.node_name] if pod.node_name else [],
                queue=pod.queue_name,
                pods=1,
                new=_is_new(since, last_visit),
                claims=len(pod.resource_claims or ()),
            )
        )
    oldest = dt.datetime.min.replace(tzinfo=dt.UTC)
    return sorted([*items.values(), *alone], key=lambda r: r.since or oldest, reverse=True)


def _sorted_out(
    workloads: list[ObservedWorkload],
    pods: list[ObservedPod],
    failures: list[ObservedCreateFailure],
    running: list[ObservedPod],
    last_visit: dt.datetime | None,
) -> dict[str, dict[str, list[Any]]]:
    """Per namespace: what runs, and what waits as one card per problem: a pending pod of a
    workload that waits is told on the workload's card (its explanation is the workload's),
    a Job's pending pods on the card of the Job that cannot create the rest, and pending pods
    that wait alike on one card (``PodsAlike``)."""
    out: dict[str, dict[str, list[Any]]] = defaultdict(
        lambda: {"workloads": [], "pods": [], "failures": [], "running": []}
    )
    told = {(w.namespace, w.name): w for w in workloads if not w.admitted or w.why}  # type: ignore[attr-defined]
    refused = {(f.namespace, f.kind, f.name): f for f in failures}
    for failure in failures:
        failure.pods = []  # type: ignore[attr-defined]
        out[failure.namespace]["failures"].append(failure)
    for pod in pods:
        owner = refused.get((pod.namespace, pod.owner_kind, pod.owner_name))
        card = told.get((pod.namespace, pod.workload_name))
        if owner is not None:
            owner.pods.append(pod)  # type: ignore[attr-defined]
        elif card is None:
            out[pod.namespace]["pods"].append(pod)
        elif getattr(card, "estimate", None) is None:  # admitted: its stuck pod's wait is its
            card.estimate = getattr(pod, "estimate", None)  # type: ignore[attr-defined]
    admitted: dict[str, list[ObservedWorkload]] = defaultdict(list)
    for workload in workloads:
        if (workload.namespace, workload.name) in told:
            out[workload.namespace]["workloads"].append(workload)
        else:
            admitted[workload.namespace].append(workload)
    by_namespace: dict[str, list[ObservedPod]] = defaultdict(list)
    for pod in running:
        by_namespace[pod.namespace].append(pod)
    for namespace in {*admitted, *by_namespace}:
        out[namespace]["running"] = _running(
            admitted[namespace], by_namespace[namespace], last_visit
        )
    for seen in out.values():
        seen["pods"] = _alike(seen["pods"])
    return out


def _share(amount_text: str, whole_text: str) -> tuple[int, bool]:
    """A bar's fill (at most 100) and whether the amount is over the whole: nothing used is
    an empty bar, of a whole of 0 too (0 of 0 was drawn full); something used of 0 is full."""
    try:
        amount, whole = parse_quantity(amount_text or "0"), parse_quantity(whole_text or "0")
    except QuantityError:
        return 0, False
    if amount <= 0:
        return 0, False
    return (100 if whole <= 0 else min(100, round(100 * amount / whole))), amount > whole


def _quota_use(namespaces: list[Any], statuses: Statuses) -> None:
    """Each quota item's use as the cluster counts it (the ResourceQuota's ``status.used``):
    ``item.used`` is None when the cluster has not counted it yet, ``item.fill`` the bar's
    share (at most 100) and ``item.over`` whether the use is above the hard limit (a quota
    lowered under its use)."""
    for ns in namespaces:
        status = statuses.get((ns.cluster_id, "ResourceQuota", ns.name, ns.quota_name))
        used = None if status is None else status.get("used") or {}
        enforced = {} if status is None else status.get("hard") or {}
        for item in ns.quota_items.all():
            item.used = None if used is None else used.get(item.resource, "0")
            # What the cluster enforces, when it is not the portal's value (a hand edit in
            # the cluster the portal's apply could not take back): the bar and the limit
            # show the cluster's, with the portal's named as not applied.
            item.enforced = _other_value(enforced.get(item.resource), item.hard)
            item.limit = item.enforced or item.hard
            item.fill, item.over = (
                (0, False) if item.used is None else _share(item.used, item.limit)
            )


def _other_value(enforced: str | None, wanted: str) -> str:
    """``enforced`` when it is another amount than ``wanted`` (spelled either way), else ""."""
    if enforced is None:
        return ""
    try:
        return "" if parse_quantity(enforced) == parse_quantity(wanted) else enforced
    except QuantityError:
        return "" if enforced == wanted else enforced


def _queue_use(
    namespaces: list[Any], statuses: Statuses, lendable: dict[tuple[int, str], Lendable]
) -> None:
    """Each LocalQueue's admitted and pending workloads (``lq.seen`` None until polled) and
    its ClusterQueue's use of each nominal quota, with what it borrows from its cohort and
    what it could borrow at most (``row["may_borrow"]``; ``row["admits_none"]``: a nominal
    quota of 0 and nothing to borrow). ``lq.admits_nothing``: why no workload of the queue
    can be admitted at all, in words ("" when some can)."""
    for ns in namespaces:
        for lq in ns.local_queues.all():
            cq = lq.cluster_queue
            lq.seen = statuses.get((ns.cluster_id, "LocalQueue", ns.name, lq.name))
            cq_status = statuses.get((ns.cluster_id, "ClusterQueue", "", cq.name), {})
            lq.cq_rows = quota_rows(cq, cq_status)
            lending = lendable.get((ns.cluster_id, cq.name), {})
            for row in lq.cq_rows:
                seen = row["used"] != "—"
                row["fill"], row["over"] = _share(row["used"], row["nominal"]) if seen else (0, 0)
                row["borrows"] = seen and row["borrowed"] not in ("0", "")
                nominal, may_borrow = _room(row, lending.get((row["flavor"], row["resource"])))
                row["may_borrow"] = format_quantity(may_borrow)
                row["admits_none"] = nominal <= 0 and may_borrow <= 0
            lq.admits_nothing = _admits_nothing(lq, cq_status)


def _amount(text: Any) -> Fraction | None:
    try:
        return None if text in (None, "") else parse_quantity(str(text))
    except QuantityError:
        return None


def _lendable(quotas: list[tuple[str, str, str | None, str | None, int]]) -> Lendable:
    """Per (flavor, resource): what the other queues and the cohorts of a queue's cohort
    tree may lend at most (each one's nominal quota, or its lending limit when lower), from
    their quotas counted by amount (``home_observed_from``)."""
    out: dict[tuple[str, str], Fraction] = defaultdict(Fraction)
    for flavor, resource, nominal_text, limit_text, count in quotas:
        nominal = _amount(nominal_text) or Fraction(0)
        limit = _amount(limit_text)
        lends = nominal if limit is None else min(nominal, limit)
        out[(flavor, resource or "")] += lends * count
    return dict(out)  # kept and shared: a plain dict, which a lookup never grows


def _room(row: dict[str, Any], lendable: Fraction | None) -> tuple[Fraction, Fraction]:
    """A quota row's nominal quota and what its queue could borrow of it at most: what its
    cohort tree lends, capped by the row's borrowing limit (nothing in no cohort)."""
    nominal = _amount(row["nominal"]) or Fraction(0)
    limit = _amount(row["borrowing"])
    may_borrow = max(Fraction(0), lendable or Fraction(0))
    return nominal, may_borrow if limit is None else min(limit, may_borrow)


def _admits_nothing(lq: Any, cq_status: dict[str, Any]) -> str:
    """Why no workload of ``lq`` can be admitted, in words ("" when one can)."""
    cq = lq.cluster_queue
    if lq.stop_policy != "None":
        return f"LocalQueue {lq.name} is stopped ({lq.get_stop_policy_display()})."
    if lq.budget_hold:
        return f"LocalQueue {lq.name} is held: the team's budget is spent (running work goes on)."
    if cq.stop_policy != "None":
        return f"ClusterQueue {cq.name} is stopped ({cq.get_stop_policy_display()})."
    for condition in cq_status.get("conditions") or []:
        if condition.get("type") == "Active" and condition.get("status") == "False":
            message = str(condition.get("message") or condition.get("reason") or "").strip()
            return f"ClusterQueue {cq.name} is inactive" + (f": {message}" if message else ".")
    if not cq.resource_groups:
        return f"ClusterQueue {cq.name} has no resource groups: it covers no resource."
    if all(row["admits_none"] for row in lq.cq_rows):
        where = (
            "it is in no cohort, so it has nothing to borrow"
            if cq.cohort_id is None
            else "its cohort has none of it to lend (or its borrowing limit is 0)"
        )
        return f"ClusterQueue {cq.name} has a nominal quota of 0 of every resource, and {where}."
    return ""


def _grants(teams: Sequence[Team]) -> dict[int, list[QuotaChangeRequest]]:
    grants: dict[int, list[QuotaChangeRequest]] = defaultdict(list)
    for grant in (
        QuotaChangeRequest.objects.filter(
            team__in=teams, state=QuotaChangeRequest.State.APPROVED, grant_until__isnull=False
        )
        # a grant whose namespace or queue was deleted grants nothing any more
        .exclude(kind=QuotaChangeRequest.Kind.NAMESPACE, namespace__isnull=True)
        .exclude(kind=QuotaChangeRequest.Kind.QUEUE, cluster_queue__isnull=True)
        .select_related("namespace", "cluster_queue")
        .order_by("grant_until")
    ):
        grants[grant.team_id].append(grant)
    return grants


def _changes_hitting(teams: Sequence[Team]) -> dict[int, list[MigChangeRequest]]:
    """Per team, the MIG changes and drains of other teams that hit it (its pods evicted,
    its quotas' backing taken): open ones, and those that ran and ended in the last three
    days (a rejected or cancelled one changed nothing)."""
    recent = timezone.now() - HIT_RECENTLY
    hits: dict[int, list[MigChangeRequest]] = defaultdict(list)
    rows = (
        MigChangeRequest.teams_hit.through.objects.filter(team__in=teams)
        .filter(
            Q(migchangerequest__state__in=OPEN_STATES) | Q(migchangerequest__updated_at__gte=recent)
        )
        .exclude(migchangerequest__state__in=["rejected", "cancelled"])
        .select_related("migchangerequest__team", "team")
        .order_by("-migchangerequest__created_at")
    )
    for row in rows:
        change = row.migchangerequest
        if change.team_id != row.team_id:
            change.pods_of_team = sum(  # type: ignore[attr-defined]
                1 for e in change.assessment.get("evictions", []) if e.get("team") == row.team.slug
            )
            hits[row.team_id].append(change)
    return hits
