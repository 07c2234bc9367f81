"""Reads of queues for pages: a ClusterQueue's quotas as rows, next to what Kueue reports
of their use when the loop observed it. Kueue reports two sums: ``flavorsUsage`` (what
admitted workloads hold: "in use") and ``flavorsReservation`` (also the workloads that hold
quota while their admission checks run: what the next workload must fit beside,
"reserved"); without admission checks they are equal."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable
from dataclasses import replace
from fractions import Fraction
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser, AnonymousUser

from cluster.models import Cluster, ObservedNode
from cluster.scope import cluster_id_of
from portal.access.permissions import sees_every_team, user_id
from portal.infra.round_trips import Read, read_together
from portal.models import PlatformRole
from portal.vocabulary.quantity import QuantityError, format_quantity, parse_quantity
from queues import whatif
from queues.models import ClusterQueue, Cohort, LocalQueue, ResourceFlavor, StopPolicy
from queues.observed import ObservedKueue, observed_kueue
from queues.rules import quota_entries
from tenants.models import LimitRangeItem, Membership, Namespace, PriorityClass, QuotaItem, Team


def _usage(
    status: dict[str, Any], key: str = "flavorsUsage"
) -> dict[tuple[str, str], dict[str, str]]:
    out = {}
    for flavor in status.get(key) or []:
        for resource in flavor.get("resources") or []:
            out[(flavor.get("name", ""), resource.get("name", ""))] = {
                "total": str(resource.get("total", "0")),
                "borrowed": str(resource.get("borrowed", "0")),
            }
    return out


def quota_rows(cq: ClusterQueue, status: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per (flavor, resource): nominal quota, borrowing and lending limits, what
    admitted workloads use (``flavorsUsage``), what is reserved (``flavorsReservation``)
    and borrowed ("—" when the queue was not observed yet)."""
    usage = _usage(status)
    reservation = _usage(status, "flavorsReservation")
    rows = []
    for key, flavor, quota in quota_entries(cq.resource_groups):
        used = usage.get((flavor, quota["name"]), {})
        reserved = reservation.get((flavor, quota["name"]), {})
        rows.append(
            {
                "key": key,
                "flavor": flavor,
                "resource": quota["name"],
                "nominal": str(quota.get("nominalQuota", "")),
                "borrowing": str(quota.get("borrowingLimit", "") or ""),
                "lending": str(quota.get("lendingLimit", "") or ""),
                "used": used.get("total", "—" if not status else "0"),
                "reserved": reserved.get("total", "—" if not status else "0"),
                "borrowed": used.get("borrowed", "—" if not status else "0"),
            }
        )
    return rows


# ----------------------------------------------------------------------------- quota what-if

HIDDEN = "another team's workload"
NAMESPACE_NOTE = (
    "Kueue does not look at a namespace's ResourceQuota: it admits by its ClusterQueue's "
    "quota, and the ResourceQuota then decides whether the admitted workload's pods are "
    "created (refused pods wait, holding the queue's quota)."
)


def _limit(quota: dict[str, Any], key: str) -> Fraction | None:
    value = quota.get(key)
    return None if value in (None, "") else parse_quantity(str(value))


def _queue(cq: ClusterQueue, cohort_names: dict[int, str]) -> whatif.Queue:
    """A ClusterQueue as the simulation reads it (quantities must be valid: full_clean)."""
    groups = tuple(
        whatif.Group(
            tuple(g.get("coveredResources") or ()),
            tuple(f["name"] for f in g.get("flavors") or ()),
        )
        for g in cq.resource_groups or []
    )
    quotas = {
        (flavor, q["name"]): whatif.Quota(
            parse_quantity(str(q.get("nominalQuota", "0"))),
            _limit(q, "borrowingLimit"),
            _limit(q, "lendingLimit"),
        )
        for _, flavor, q in quota_entries(cq.resource_groups)
    }
    return whatif.Queue(
        name=cq.name,
        groups=groups,
        quotas=quotas,
        cohort=cohort_names.get(cq.cohort_id or 0, ""),
        strategy=cq.queueing_strategy,
        within_cluster_queue=cq.preemption_within_cluster_queue,
        reclaim_within_cohort=cq.preemption_reclaim_within_cohort,
        borrow_within_cohort=cq.preemption_borrow_within_cohort,
        borrow_max_priority=cq.borrow_max_priority_threshold,
        weight=parse_quantity(cq.fair_sharing_weight) if cq.fair_sharing_weight else Fraction(1),
        when_can_borrow=cq.when_can_borrow,
        stopped=cq.stop_policy != StopPolicy.NONE,
    )


def _placed(w: whatif.Workload, queues: dict[str, whatif.Queue]) -> whatif.Workload:
    """An admitted workload polled before flavors were recorded: each resource on the first
    flavor of its group (the only one, in most queues)."""
    q = queues.get(w.queue)
    if not w.admitted or w.flavors or q is None:
        return w
    flavors = {r: g.flavors[0] for g in q.groups for r in w.requests if r in g.resources}
    return replace(w, flavors=flavors)


def kueue_world(observed: ObservedKueue, cluster_id: int) -> whatif.World:
    """The ClusterQueues of cluster ``cluster_id`` as saved (by name: a name is a queue on
    one cluster only), the Cohorts' tree with each one's own quota and limits, and the
    observed workloads (two queries whatever the number of queues)."""
    cohorts = list(Cohort.objects.on(cluster_id))
    names = {c.pk: c.name for c in cohorts}
    queues = {cq.name: _queue(cq, names) for cq in ClusterQueue.objects.on(cluster_id)}
    tree = {
        c.name: whatif.Cohort(
            parent=names.get(c.parent_id or 0, ""),
            quotas={
                (flavor, q["name"]): whatif.Quota(
                    parse_quantity(str(q.get("nominalQuota", "0"))),
                    _limit(q, "borrowingLimit"),
                    _limit(q, "lendingLimit"),
                )
                for _, flavor, q in quota_entries(c.resource_groups)
            },
        )
        for c in cohorts
    }
    return whatif.World(
        queues=tuple(queues.values()),
        workloads=tuple(_placed(w, queues) for w in observed.workloads),
        fair_sharing=observed.fair_sharing,
        cohorts=tree,
    )


def _namespaces_seen(user: AbstractBaseUser | AnonymousUser, cluster_id: int) -> set[str] | None:
    """The namespaces of cluster ``cluster_id`` whose workloads the user may see by name
    (None: every one): a namespace of the same name on another cluster may be another
    team's."""
    if sees_every_team(user):
        return None
    return set(
        Namespace.objects.on(cluster_id)
        .filter(team__memberships__user_id=user_id(user))
        .values_list("name", flat=True)
    )


def _name(key: str, seen: set[str] | None) -> str:
    return key if seen is None or key.split("/", 1)[0] in seen else HIDDEN


def _amount(value: Fraction) -> str:
    return format_quantity(value) if value.denominator == 1 else str(float(value))


def present_outcome(outcome: whatif.Outcome, seen: set[str] | None) -> dict[str, Any]:
    """The outcome as plain values for a page or the API: another team's workloads are not
    named (``seen``: the namespaces the reader may see; None: all)."""
    return {
        "admitted": [
            {
                "order": i,
                "workload": _name(a.workload, seen),
                "cluster_queue": a.queue,
                "flavors": dict(a.flavors),
                "borrows": a.borrows,
                "preempts": [_name(p, seen) for p in a.preempts],
            }
            for i, a in enumerate(outcome.admitted, start=1)
        ],
        "preempted": [
            {
                "workload": _name(p.workload, seen),
                "cluster_queue": p.queue,
                "by": _name(p.by, seen),
                "reason": p.reason,
                "policy": p.policy,
            }
            for p in outcome.preempted
        ],
        "waiting": [
            {"workload": _name(w.workload, seen), "cluster_queue": w.queue, "why": w.why}
            for w in outcome.waiting
        ],
        "borrowing": [
            {
                "cluster_queue": b.queue,
                "cohort": b.cohort,
                "flavor": b.flavor,
                "resource": b.resource,
                "borrowed_before": _amount(b.borrowed_before),
                "borrowed_after": _amount(b.borrowed_after),
                "may_borrow_before": _amount(b.may_borrow_before),
                "may_borrow_after": _amount(b.may_borrow_after),
                "loses": _amount(max(Fraction(0), b.may_borrow_before - b.may_borrow_after)),
            }
            for b in outcome.borrowing
        ],
        "fair_sharing": outcome.fair_sharing,
        "scope": list(outcome.scope),
        "gave_up": outcome.gave_up,
        "not_modelled": list(outcome.not_modelled),
    }


def simulates_kueue() -> bool:
    """The what-if simulates Kueue: with Volcano queues there is nothing it could say."""
    return bool(settings.QM_QUEUE_BACKEND != "volcano")


def cluster_queue_what_if(
    user: AbstractBaseUser | AnonymousUser, edited: ClusterQueue
) -> dict[str, Any]:
    """What Kueue would do, on the last poll's workloads, with ``edited`` in place of the
    saved ClusterQueue of its name on its cluster (``edited`` passed ``full_clean``)."""
    cluster_id = cluster_id_of(edited.cluster_id)
    observed = observed_kueue(cluster_id)
    current = kueue_world(observed, cluster_id)
    cohort_name = edited.cohort.name if edited.cohort_id and edited.cohort else ""
    names = {edited.cohort_id: cohort_name} if edited.cohort_id else {}
    proposed = current.with_queue(_queue(edited, names))
    shown = present_outcome(whatif.what_if(current, proposed), _namespaces_seen(user, cluster_id))
    shown["known"] = observed.known
    return shown


def with_nominal(cq: ClusterQueue, flavor: str, resource: str, value: str) -> ClusterQueue:
    """A copy of ``cq`` with one nominal quota changed (nothing saved)."""
    edited = copy.deepcopy(cq)
    edited.resource_groups = copy.deepcopy(cq.resource_groups)
    edited.set_nominal_quota(flavor, resource, value)
    return edited


def _bare(item: str) -> str | None:
    """The resource a quota item limits the requests of (None: limits, counts)."""
    if item.startswith("requests."):
        return item.removeprefix("requests.")
    if item in {"cpu", "memory", "ephemeral-storage"}:
        return item
    return None


def _quantity_or_none(text: str | None) -> Fraction | None:
    try:
        return parse_quantity(text) if text not in (None, "") else None
    except QuantityError:
        return None


def namespace_quota_what_if(
    namespace: Namespace,
    item: str,
    requested: str,
) -> dict[str, Any]:
    """Which waiting workloads of ``namespace`` (and refused pods) would have their pods fit
    its ResourceQuota with ``item`` set to ``requested``, against the use the cluster
    counted last on the namespace's cluster. The caller checked that the reader may see the
    namespace."""
    observed = observed_kueue(namespace.cluster_id)
    current = namespace.quota_items.filter(resource=item).first()
    resource = _bare(item)
    shown: dict[str, Any] = {
        "known": observed.known,
        "resource": resource or item,
        "note": NAMESPACE_NOTE,
        "rows": [],
    }
    if resource is None:
        shown["note"] = (
            f"{item} is not checked against workloads' requests here: only requests.* items "
            "(and cpu, memory) are simulated."
        )
        return shown
    used = _quantity_or_none(observed.quota_used.get(namespace.name, {}).get(item)) or Fraction(0)
    rows = whatif.namespace_quota_fit(
        observed.workloads,
        namespace=namespace.name,
        item=item,
        resource=resource,
        refused=observed.refused,
        used=used,
        before=_quantity_or_none(current.hard if current else None),
        after=_quantity_or_none(requested),
    )
    shown["used"] = _amount(used)
    shown["rows"] = [  # the namespace is the reader's own (or they see every team)
        {
            "workload": r.workload,
            "amount": _amount(r.amount),
            "fits_before": r.fits_before,
            "fits_after": r.fits_after,
        }
        for r in rows
    ]
    return shown


# ----------------------------------------------------------------------------- a team's setup


def _table(model: Any) -> str:
    return str(model._meta.db_table)


def _teams_sql() -> str:
    """One query for the teams a page shows with all they are set up with: each team's row,
    whether the user may ask changes for it, its allowed priority classes, and its namespaces
    with their quota items, limits and LocalQueues (each with its ClusterQueue), as JSON, in
    the models' own orderings. A platform admin (a superuser, or one with the role) gets
    every team and may ask for each; anyone else their own, asking for those they lead.
    Parameters: those of ``_teams_params``."""
    team, ns, membership = _table(Team), _table(Namespace), _table(Membership)
    allowed = _table(Team.allowed_priority_classes.through)
    queues = (
        f"SELECT jsonb_agg(jsonb_build_object('lq', to_jsonb(lq), 'cq', to_jsonb(cq)) "
        f"ORDER BY lq.name) FROM {_table(LocalQueue)} lq JOIN {_table(ClusterQueue)} cq "
        "ON cq.id = lq.cluster_queue_id WHERE lq.namespace_id = n.id"
    )
    namespaces = (
        "SELECT jsonb_agg(jsonb_build_object('ns', to_jsonb(n), "
        f"'quota', (SELECT jsonb_agg(to_jsonb(q) ORDER BY q.resource) FROM {_table(QuotaItem)} q "
        "WHERE q.namespace_id = n.id), "
        f"'limits', (SELECT jsonb_agg(to_jsonb(li) ORDER BY li.limit_type, li.resource) "
        f"FROM {_table(LimitRangeItem)} li WHERE li.namespace_id = n.id), "
        f"'queues', ({queues})) ORDER BY n.name) FROM {ns} n WHERE n.team_id = t.id"
    )
    classes = (
        f"SELECT jsonb_agg(to_jsonb(pc) ORDER BY pc.value DESC, pc.name) "
        f"FROM {_table(PriorityClass)} pc JOIN {allowed} a ON a.priorityclass_id = pc.id "
        "WHERE a.team_id = t.id"
    )
    admin = (
        f"(%s OR EXISTS (SELECT 1 FROM {_table(PlatformRole)} r "
        "WHERE r.user_id = %s AND r.role = %s))"
    )
    # a set read once (a hashed subplan), not a probe per team
    leads = f"t.id IN (SELECT team_id FROM {membership} WHERE user_id = %s AND role = %s)"
    # The user's teams, or every team for an admin: as a set of ids, so that a plan made for
    # any user (a prepared statement's generic plan) starts from the user's memberships, and
    # reads every team only when the admin test (once per statement) is true.
    scope = (
        f"t.id = ANY(ARRAY(SELECT team_id FROM {membership} WHERE user_id = %s "
        f"UNION ALL SELECT id FROM {team} WHERE {admin}))"
    )
    return (
        f"SELECT t.id, t.slug, t.name, t.description, {admin} OR {leads}, "
        f"({classes}), ({namespaces}) FROM {team} t WHERE {scope} ORDER BY t.slug"
    )


def _teams_params(user: AbstractBaseUser) -> list[Any]:
    pk, superuser = user_id(user), bool(getattr(user, "is_superuser", False))
    admin = [superuser, pk, PlatformRole.Role.ADMIN]
    return [*admin, pk, Membership.Role.LEAD, pk, *admin]


_TEAMS_SQL = _teams_sql()


def _cached(instance: Any, name: str, model: Any, rows: list[Any]) -> None:
    """``instance.<name>.all()`` answers ``rows`` without a query, as a prefetch would."""
    queryset = model.objects.all()
    queryset._result_cache = rows
    queryset._prefetch_done = True
    instance.__dict__.setdefault("_prefetched_objects_cache", {})[name] = queryset


def _namespace(team: Team, data: dict[str, Any]) -> Namespace:
    ns = Namespace(**data["ns"])
    ns.team = team
    _cached(ns, "quota_items", QuotaItem, [QuotaItem(**q) for q in data["quota"] or []])
    _cached(ns, "limit_items", LimitRangeItem, [LimitRangeItem(**i) for i in data["limits"] or []])
    local_queues = []
    for row in data["queues"] or []:
        lq = LocalQueue(**row["lq"])
        lq.cluster_queue = ClusterQueue(**row["cq"])
        local_queues.append(lq)
    _cached(ns, "local_queues", LocalQueue, local_queues)
    return ns


def teams_set_up(user: AbstractBaseUser | AnonymousUser) -> list[Team]:
    """The teams the user belongs to (every team for a platform admin), as
    ``list_teams_for_user`` gives them (namespaces with quota items, limits and LocalQueues
    with their ClusterQueue; allowed priority classes) and ``team.may_ask`` (whether the user
    may ask changes for it): in one query, whatever the number of teams."""
    read = teams_read(user)
    return [] if read is None else teams_from(read_together(read)[0])


def teams_read(user: AbstractBaseUser | AnonymousUser) -> Read | None:
    """The read of ``teams_set_up`` (None for a user not signed in), for a page that sends
    it with others in one round trip; ``teams_from`` makes its rows the teams."""
    if not user.is_authenticated:
        return None
    return Read(_TEAMS_SQL, _teams_params(user))  # type: ignore[arg-type]


def teams_from(rows: list[tuple[Any, ...]]) -> list[Team]:
    """The teams of ``teams_read``'s rows, set up as ``teams_set_up`` gives them."""
    teams = []
    for pk, slug, name, description, may_ask, classes, namespaces in rows:
        team = Team(id=pk, slug=slug, name=name, description=description)
        team.may_ask = may_ask  # type: ignore[attr-defined]
        pcs = [PriorityClass(**pc) for pc in _json(classes)]
        _cached(team, "allowed_priority_classes", PriorityClass, pcs)
        _cached(team, "namespaces", Namespace, [_namespace(team, n) for n in _json(namespaces)])
        teams.append(team)
    return teams


def _json(value: Any) -> list[Any]:
    """A jsonb column as psycopg gives it (decoded), or as text where it is not."""
    if value is None:
        return []
    return json.loads(value) if isinstance(value, str) else list(value)


# ----------------------------------------------------------------------------- the queue editor


def editor_queue_reads(name: str) -> list[Read]:
    """The ClusterQueues of ``name`` (one per cluster at most), by their cluster's name, and
    their cohorts: for the editor's first round trip (``editor_queue_from``)."""
    queues, cluster = _table(ClusterQueue), _table(Cluster)
    return [
        Read(
            f"SELECT q.* FROM {queues} q JOIN {cluster} c ON c.id = q.cluster_id "
            "WHERE q.name = %s ORDER BY c.name",
            [name],
            ClusterQueue,
        ),
        Read(
            f"SELECT * FROM {_table(Cohort)} WHERE id IN "
            f"(SELECT cohort_id FROM {queues} WHERE name = %s)",
            [name],
            Cohort,
        ),
    ]


def rows_version_sql(*tables: tuple[str, Any]) -> str:
    """One row: how many rows these (tag, model) tables hold and their version, every row's
    ``xmin`` (the transaction that wrote it, which PostgreSQL sets on each insert and
    update) hashed with its table's tag and its id: any row written, added or removed moves
    it. What a page keeps in the process is kept under it."""
    rows = " UNION ALL ".join(
        f"SELECT '{tag}' AS t, id, xmin FROM {_table(model)}" for tag, model in tables
    )
    return f"SELECT count(*), sum(hashtextextended(concat_ws(':', t, id, xmin), 0)) FROM ({rows}) v"


def editor_kept_under_read() -> Read:
    """One row: the version of what the editor's reads of every other queue and of every
    node read (``read_kept`` keeps their rows under it): every ClusterQueue, cohort and
    ResourceFlavor row's (``rows_version_sql``); then each cluster's newest node stamp (the
    poll stamps every node it changes, finds gone or finds again: ``last_changed``; read
    from its index) and the newest node id (a node row written anew). A node row is never
    deleted but with its cluster (the poll marks it gone)."""
    queues = rows_version_sql(("q", ClusterQueue), ("c", Cohort), ("f", ResourceFlavor))
    nodes = _table(ObservedNode)
    return Read(
        f"SELECT q.*, (SELECT array_agg((SELECT max(n.last_changed) FROM {nodes} n "
        f"WHERE n.cluster_id = c.id) ORDER BY c.id) FROM {_table(Cluster)} c), "
        f"(SELECT max(id) FROM {nodes}) FROM ({queues}) q"
    )


def editor_queue_from(rows: list[list[Any]], cluster_id: int | None) -> ClusterQueue | None:
    """The queue of ``editor_queue_reads``' rows on the cluster ``cluster_id`` (the chosen
    one), or on the first cluster by name that has one when none is chosen, with its
    cohort."""
    queues, cohorts = rows
    found = [q for q in queues if cluster_id is None or q.cluster_id == cluster_id]
    if not found:
        return None
    cq: ClusterQueue = found[0]
    cohort = {c.pk: c for c in cohorts}.get(cq.cohort_id)
    if cohort is not None:
        cq.cohort = cohort
    return cq


def quota_entries_sql(groups: str) -> str:
    """``queues.rules.quota_entries`` in the database: lateral joins over the resource groups
    in the JSON column ``groups``, giving each quota entry as ``r`` (``name``,
    ``nominalQuota``, limits) with its flavor as ``f``; groups that are no array give none.
    ``g.gi``, ``f.fi`` and ``r.ri`` number them as written (``ORDER BY`` them for
    ``quota_entries``' order)."""
    return (
        f"CROSS JOIN LATERAL jsonb_array_elements(CASE jsonb_typeof({groups}) WHEN 'array' "
        f"THEN {groups} ELSE '[]' END) WITH ORDINALITY AS g(g, gi) "
        "CROSS JOIN LATERAL jsonb_array_elements(COALESCE(g -> 'flavors', '[]')) "
        "WITH ORDINALITY AS f(f, fi) "
        "CROSS JOIN LATERAL jsonb_array_elements(COALESCE(f -> 'resources', '[]')) "
        "WITH ORDINALITY AS r(r, ri) "
    )


def gpu_quota_entries_read(cluster_id: int) -> Read:
    """Each GPU quota entry of the cluster's ClusterQueues in ``quota_entries``' order (queue
    by name, then group, flavor and resource as written): (queue, flavor, resource, nominal
    quota as written)."""
    return Read(
        f"SELECT q.name, f ->> 'name', r ->> 'name', r ->> 'nominalQuota' "
        f"FROM {_table(ClusterQueue)} q "
        + quota_entries_sql("q.resource_groups")
        + "WHERE q.cluster_id = %s AND starts_with(r ->> 'name', 'nvidia.com/') "
        "ORDER BY q.name, g.gi, f.fi, r.ri",
        [cluster_id],
    )


def promised_by_others_read(cq: ClusterQueue, cluster_id: int, resources: Iterable[str]) -> Read:
    """The nominal quotas of ``resources`` every other ClusterQueue of the cluster promises,
    counted in the database by (flavor, resource, amount as written): a handful of rows
    whatever the number of queues (``promised_by_others`` sums them)."""
    sql = (
        "SELECT f ->> 'name', r ->> 'name', jsonb_typeof(r -> 'nominalQuota'), "
        f"r ->> 'nominalQuota', count(*) FROM {_table(ClusterQueue)} q "
        + quota_entries_sql("q.resource_groups")
        + "WHERE q.cluster_id = %s AND q.id IS DISTINCT FROM %s "
        "AND r ->> 'name' = ANY(%s::text[]) GROUP BY 1, 2, 3, 4"
    )
    return Read(sql, [cluster_id, cq.pk, sorted(set(resources))])


def promised_by_others(rows: list[tuple[Any, ...]]) -> dict[tuple[str, str], Fraction]:
    """(flavor, resource) -> what the other queues promise, from ``promised_by_others_read``'s
    rows: each amount parsed once (as ``ClusterQueue.quota`` parses it: text, or a whole
    number) and counted."""
    out: dict[tuple[str, str], Fraction] = {}
    for flavor, resource, kind, text, queues in rows:
        if kind == "string":
            amount = parse_quantity(text)
        elif kind == "number" and text.lstrip("-").isdigit():
            amount = parse_quantity(int(text))
        else:
            raise QuantityError(f"{text!r} is not a quantity")
        out[(flavor, resource)] = out.get((flavor, resource), 0) + amount * queues
    return out
