"""The pages that show the loop's two sides together (a team's home is overview.home): the
fleet (nodes by pool, their GPUs, health, drift and the last poll), one node, and the queues
(quotas next to what Kueue reports in use)."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils.functional import SimpleLazyObject
from django.utils.safestring import SafeString, mark_safe

from changes.approval import may_request
from changes.facts import shortfalls_now, shortfalls_reads
from changes.selectors import list_mig_changes_for_user
from cluster import dra
from cluster.models import (
    AppliedObject,
    Cluster,
    Drift,
    ObservedNode,
    ObservedObject,
    ObservedPod,
    ObservedWorkload,
)
from cluster.scope import cluster_choice
from cluster.selectors import (
    ClusterStatus,
    apply_notices,
    apply_notices_read,
    first_reads,
    node_dra,
    notices_for,
    open_drift_reads,
    statuses_of,
)
from fleet.membership import pool_of
from fleet.models import NodePool
from health.selectors import attach_health
from overview import selectors
from overview.forms import NodeSearchForm
from overview.freshness import settings_api_status
from overview.node_rows import node_rows
from portal.access.permissions import is_platform_admin, sees_every_team, user_id
from portal.access.selectors import pod_names_for
from portal.infra.htmx import HtmxHttpRequest
from portal.infra.process_cache import ProcessCache
from portal.infra.round_trips import Read, page_together, queryset_read, read_together
from portal.vocabulary.names import PodNames
from queues import fairness
from queues.models import ClusterQueue, Cohort, LocalQueue
from queues.observed import first_in_line
from queues.selectors import quota_rows
from tenants.models import Namespace
from tenants.selectors import priority_classes_for

NODES_PAGE = 50  # nodes on a page of a pool's list
DRIFT_SHOWN = 20  # drift rows on the Fleet page (the rest: counted, and first in the lists)


@login_required
def fleet(request: HtmxHttpRequest) -> HttpResponse:
    """The fleet: each pool summed up (capacity and allocation per GPU resource, the MIG
    layouts in use, the nodes needing attention, drift and health), what the cluster did not
    take, and queues promising more than it has. Each pool's nodes open on demand
    (``fleet_nodes``). The same queries for 40 nodes or 5,000: two round trips to the
    database besides the session's (the clusters, their polls, pools and the apply notices;
    then every shown cluster's drift, stamps, queues and flavors), more only when a cluster
    has flavors to sum or its pools changed."""
    if request.GET.get("q") or request.GET.get("pool"):  # the node search's old address
        return redirect(f"{reverse('fleet-nodes')}?{request.GET.urlencode()}")
    notices, pool_rows = first_reads(request, apply_notices_read(), selectors.Pools.read_every())
    choice = cluster_choice(request)
    statuses = {s.cluster.pk: s for s in statuses_of(request)}
    problems, warned = apply_notices(notices)
    # whose objects the user may read by name: read on first use (none when nothing to name)
    names: Any = SimpleLazyObject(lambda: pod_names_for(request.user))
    per_cluster = [_section_reads(cluster) for cluster in choice.shown]
    rows = iter(read_together(*(read for reads in per_cluster for read in reads)))
    sections = [
        _fleet_section(
            cluster,
            selectors.Pools.among(pool_rows, choice.clusters, cluster.pk),
            [next(rows) for _ in reads],
            problems,
            warned,
            statuses[cluster.pk],
            names,
            several=choice.several,
        )
        for cluster, reads in zip(choice.shown, per_cluster, strict=True)
    ]
    # the search form's pools: the chosen cluster's, or every cluster's
    pools = selectors.Pools.among(pool_rows, choice.clusters, _pk(choice.chosen))
    context = {
        "sections": sections,
        "several": choice.several,
        "api": settings_api_status(request),
        "form": NodeSearchForm(pools=pools),
    }
    template = "overview/fleet.html#fleet-body" if request.htmx else "overview/fleet.html"
    response = render(request, template, context)
    response["Vary"] = "HX-Request"
    return response


def _pk(cluster: Cluster | None) -> int | None:
    return cluster.pk if cluster is not None else None


def _section_reads(cluster: Cluster) -> list[Read]:
    """What one cluster's part of the Fleet page reads, in ``_fleet_section``'s order."""
    return [
        *open_drift_reads(cluster.pk, DRIFT_SHOWN),
        selectors.live_nodes_read(cluster.pk),
        selectors.stamps_read(cluster.pk),
        *shortfalls_reads(cluster.pk),
    ]


def _fleet_section(
    cluster: Cluster,
    pools: selectors.Pools,
    rows: list[list[Any]],
    problems: list[AppliedObject],
    warned: list[AppliedObject],
    status: ClusterStatus,
    names: PodNames,
    *,
    several: bool,
) -> dict[str, Any]:
    """One cluster's part of the Fleet page (``pools``: its pools; ``rows``: what
    ``_section_reads`` read): its last poll, what was not applied to it or was warned of
    (other teams' objects counted, not named), its open drift and its pools summed up."""
    drift, [(total,)], [(live,)], stamps, *shortfall_rows = rows
    problems, others_problems = notices_for(
        names, [p for p in problems if p.cluster_id == cluster.pk]
    )
    warned, others_warned = notices_for(names, [p for p in warned if p.cluster_id == cluster.pk])
    return {
        "cluster": cluster,
        "pool_rows": pools,
        "pools": bool(pools.rows) or live,
        "pool_cards": _pool_cards(pools, cluster, stamps, several=several),
        "drift": drift,
        "drift_total": total,
        "sync": status.latest,
        "problems": problems,
        "others_problems": others_problems,
        "warned": warned,
        "others_warned": others_warned,
        "shortfalls": shortfalls_now(cluster, shortfall_rows, stamps=tuple(stamps[0])),
    }


# this process's pool cards, under the cluster and what they were summed from
_CARDS: ProcessCache[tuple[Any, ...], str] = ProcessCache("pool cards", 64)


def _pool_cards(
    pools: selectors.Pools, cluster: Cluster, stamps: list[Any], *, several: bool
) -> SafeString:
    """A cluster's pools summed up, as the Fleet page shows them: summed and drawn again
    only when the nodes, their health or the pools changed since this process last did (one
    small query tells, ``stamps``: the rows of ``selectors.stamps_read``; the poll and the
    health collection change them every minute or so, the pages are read far more often)."""
    key = (cluster.pk, several, cluster.name, selectors.summed_from(pools, stamps))
    html = _CARDS.get(
        key,
        lambda: render_to_string(
            "overview/fleet.html#pool-cards",
            {"pools": selectors.sum_pools(pools), "cluster": cluster, "several": several},
        ),
    )
    return mark_safe(html)


@login_required
def fleet_nodes(request: HtmxHttpRequest) -> HttpResponse:
    """Nodes of one pool (or of the whole fleet) found by name or label, NODES_PAGE at a
    time, those needing attention first; htmx gets the list alone (the Fleet page opens a
    pool's list in place). The chosen cluster's nodes, or every cluster's. Three round trips
    to the database besides the session's: the clusters, their polls and pools; the count
    and the page's nodes; their health."""
    [pool_rows] = first_reads(request, selectors.Pools.read_every())
    choice = cluster_choice(request)
    pools = selectors.Pools.among(pool_rows, choice.clusters, _pk(choice.chosen))
    form = NodeSearchForm(request.GET, pools=pools)
    valid = form.is_valid()
    index = form.pool_index() if valid else None
    found = (
        selectors.fleet_nodes(pools, pool=index, **form.cleaned_data["q"])
        if valid
        else ObservedNode.objects.none()
    )
    if choice.chosen is None:  # every cluster the user may see, not another's nodes
        found = found.filter(cluster_id__in=[c.pk for c in choice.clusters])
    page = page_together(found, NODES_PAGE, request.GET.get("page"))
    nodes = list(page.object_list)
    clusters = {c.pk: c for c in choice.clusters}
    for node in nodes:
        node.of_cluster = clusters.get(node.cluster_id)  # type: ignore[attr-defined]
        node.pool_name = pools.name_of(node.pool_index)  # type: ignore[attr-defined]
        node.intended = (  # type: ignore[attr-defined]
            pools.rows[node.pool_index].mig_config if node.pool_index >= 0 else ""  # type: ignore[attr-defined]
        )
    chosen = form.cleaned_data.get("pool", "") if valid else ""
    cluster_column = choice.chosen is None and choice.several
    if index is None:
        list_id = "fleet-node-list"
    else:
        list_id = f"pool-{pools.rows[index].pk if index >= 0 else 'none'}-node-list"
    context = {
        "form": form,
        "page": page,
        "nodes": nodes,
        "pool": chosen,
        "pool_pk": pools.rows[index].pk if index is not None and index >= 0 else None,
        "list_id": list_id,
        "query": urlencode(
            {k: request.GET.get(k, "") for k in ("q", "pool", "cluster") if request.GET.get(k)}
        ),
        "cluster_column": cluster_column,
        "rows": node_rows(nodes, cluster_column=cluster_column, pool_column=not chosen),
    }
    template = (
        "overview/fleet_nodes.html#node-list" if request.htmx else "overview/fleet_nodes.html"
    )
    response = render(request, template, context, status=200 if valid else 400)
    response["Vary"] = "HX-Request"
    return response


@login_required
def node_detail(request: HttpRequest, name: str) -> HttpResponse:
    """One node: its GPUs drawn and measured, what needs attention, its pods (your teams'
    by name, others counted), and its history of changes and drift. Two clusters may
    each have a node of this name: the chosen cluster's, else the first cluster's (by name),
    the page linking the others. A node the chosen cluster lacks is another cluster's (a
    link that names no cluster, from a page of every cluster, still finds it)."""
    choice = cluster_choice(request)
    chosen = choice.chosen
    # Only the clusters the user may see: a node of another one is no node to them.
    seen = [c.pk for c in choice.clusters]
    found = (
        ObservedNode.objects.on_every_cluster()
        .filter(name=name, cluster_id__in=seen)
        .select_related("cluster")
    )
    same_name = sorted(
        found.order_by("cluster__name"),
        key=lambda n: chosen is not None and n.cluster_id != chosen.pk,
    )
    if not same_name:
        raise Http404("No node of that name.")
    node = same_name[0]
    attach_health([node])
    pool = pool_of(node.labels, NodePool.objects.on(node.cluster))
    names = pod_names_for(request.user)
    pods = list(
        ObservedPod.objects.on(node.cluster).filter(node_name=name).order_by("namespace", "name")
    )
    shown = [p for p in pods if names.named(p.cluster_id, p.namespace)]
    history = list(
        list_mig_changes_for_user(request.user)
        .filter(cluster=node.cluster, nodes__contains=[name])
        .order_by("-created_at")[:20]
    )
    drift = list(Drift.objects.on(node.cluster).filter(subject=name).order_by("-first_seen")[:20])
    by_dra = node_dra(node.cluster, name)
    context = {
        "dra": _dra_context(by_dra, names, node.cluster_id),
        "node": node,
        "also_on": [n.cluster for n in same_name[1:]],
        "pool": pool,
        "pods": shown,
        "hidden_pods": len(pods) - len(shown),
        "history": history,
        "drift": drift,
        "may_request": may_request(request.user),
        "sees_all": names.everyone,
        "visible_namespaces": names.namespaces,
        "gpu_labels": sorted((k, v) for k, v in node.labels.items() if k.startswith("nvidia.com/")),
    }
    return render(request, "overview/node_detail.html", context)


def _dra_context(by_dra: Any, names: PodNames, cluster_id: int | None) -> dict[str, Any] | None:
    """A node's DRA GPUs for its page: strips, and each device with its state and who holds
    it (another team's claim unnamed)."""
    if not by_dra:
        return None
    devices = []
    for gpu in by_dra.gpus:
        for device in gpu.devices:
            holder = by_dra.holders.get(device.key)
            if holder is not None:
                shown = holder if names.named(cluster_id, holder[0]) else None
                state = "in use"
            elif (taint := device.blocking()) is not None:
                shown, state = None, f"tainted {taint.text}"
            else:
                shown, state = None, "free" if gpu.available(device) else "blocked by counters"
            devices.append({"gpu": gpu, "device": device, "state": state, "holder": shown})
    counters = [
        {
            "gpu": gpu,
            "left": gpu.memory_slices()[0],
            "total": gpu.memory_slices()[1],
            "taint": gpu.kept_off(),
        }
        for gpu in by_dra.gpus
        if gpu.partitionable
    ]
    return {
        "gpus": len(by_dra.gpus),
        "product": " + ".join(sorted({g.product for g in by_dra.gpus if g.product})),
        "strips": [dra.strip(gpu, i) for i, gpu in enumerate(by_dra.gpus)],
        "devices": devices,
        "counters": counters,
        "offers": (offers := dra.offers(by_dra.gpus)),
        "tainted": any(o.tainted for o in offers),
    }


@login_required
def queues(request: HttpRequest) -> HttpResponse:
    """ClusterQueues by cohort (a tree when cohorts nest) with their quotas and use, what
    each lends, cohort totals, fair-sharing weights and Kueue's shares, the first waiting
    workloads of each queue (another team's unnamed), LocalQueues of your teams (every
    team's for approvers and admins), and the PriorityClass catalog: of the chosen cluster,
    or each cluster in a section of its own (cohorts never span clusters).

    A cluster of more than ``ALL_OPEN_UP_TO`` ClusterQueues shows its cohorts one line each
    and one cohort's queues at a time: ``?cohort=NAME`` (``?cohort=-``: the queues in no
    cohort), in every shown cluster that has it; a small one shows everything, unless a
    cohort is asked for. A cohort no shown cluster has is answered 404, with the list."""
    choice = cluster_choice(request)
    mine = _my_namespaces(request.user)
    asked = (request.GET.get("cohort") or "").strip()[:253] or None
    sections = [_queues_of(cluster, request.user, mine, asked) for cluster in choice.shown]
    for section in sections:
        section["idp"] = f"c{section['cluster'].pk}-" if choice.several else ""
    unknown = asked is not None and not any(s["opened"] for s in sections)
    return render(
        request,
        "overview/queues.html",
        {
            "clusters": sections,
            "several": choice.several,
            "fair_sharing": any(s["fair_sharing"] for s in sections),
            "shown": PENDING_SHOWN,
            "priority_classes": priority_classes_for(request.user),
            "is_admin": is_platform_admin(request.user),
            "sees_all": sees_every_team(request.user),
            "asked": asked,
            "unknown": unknown,
            "many_shown": len(sections) > 1,
            "no_cohort": NO_COHORT,
        },
        status=404 if unknown else 200,
    )


ALL_OPEN_UP_TO = 50  # ClusterQueues a cluster's section shows all at once
NO_COHORT = "-"  # ?cohort= of the queues in no cohort (no cohort's name: names are DNS labels)


def _queues_of(
    cluster: Cluster, user: Any, mine: set[tuple[int, str]] | None, asked: str | None
) -> dict[str, Any]:
    """One cluster's cohorts, ClusterQueues and LocalQueues with what its last poll saw:
    every queue, or (``folded``) a line per cohort and the queues of the one ``asked``."""
    # In one round trip: the statuses the poll saw, the cohorts, and every queue of the
    # cluster (its cohorts' lines need them all), without what the page never reads (a
    # thousand namespace selectors decoded for nothing).
    observed, cohort_rows, cqs = read_together(
        queryset_read(
            ObservedObject.objects.on(cluster)
            .filter(kind__in=["ClusterQueue", "Cohort"])
            .only("kind", "name", "status")
        ),
        queryset_read(Cohort.objects.filter(cluster=cluster)),
        queryset_read(
            ClusterQueue.objects.filter(cluster=cluster)
            .defer("namespace_selector", "description")
            .order_by("name")
        ),
    )
    statuses: dict[tuple[str, str], Any] = {(o.kind, o.name): o.status for o in observed}
    cohorts: dict[int | None, Cohort] = {c.pk: c for c in cohort_rows}
    facts = [_facts(cq, cohorts.get(cq.cohort_id), statuses) for cq in cqs]
    lent = {f.name: fairness.queue_rows(f) for f in facts}
    roots = fairness.cohort_tree(
        [_facts(c, cohorts.get(c.parent_id), statuses) for c in cohorts.values()], facts, lent
    )
    nodes = fairness.walk(roots)
    folded = asked is not None or len(cqs) > ALL_OPEN_UP_TO
    opened = [n for n in nodes if n.name == asked] if folded else nodes
    alone = [f for f in facts if not f.parent]
    if folded and asked != NO_COHORT:
        alone = []
    shown = {name for node in opened for name in node.queues} | {f.name for f in alone}
    in_line = (
        first_in_line(PENDING_SHOWN, cluster_id=cluster.pk, queues=shown if folded else None)
        if shown
        else {}
    )
    entries = {
        cq.name: _queue_entry(cq, fact, lent[cq.name], in_line.get(cq.name, []), mine)
        for cq, fact in zip(cqs, facts, strict=True)
        if cq.name in shown
    }
    local_queues = _local_queues(
        user, cluster, of=shown if folded and sees_every_team(user) else None
    )
    cohort_of = {f.name: f.parent or NO_COHORT for f in facts}
    for lq in local_queues:  # where its ClusterQueue is drawn (folded: that cohort open)
        lq.cohort = cohort_of.get(lq.cluster_queue.name, "")  # type: ignore[attr-defined]
    return {
        "cluster": cluster,
        "folded": folded,
        "opened": asked if folded and (opened or alone) else None,
        "summaries": fairness.summaries(roots, facts, lent) if folded else [],
        "sections": [(node, [entries[name] for name in node.queues]) for node in opened],
        "alone": [entries[f.name] for f in alone],
        "roots": roots,
        "nested": any(root.children for root in roots),
        "fair_sharing": any("fairSharing" in status for status in statuses.values()),
        "local_queues": local_queues,
    }


PENDING_SHOWN = 3  # waiting workloads named per ClusterQueue on the Queues page


def _facts(
    obj: ClusterQueue | Cohort, parent: Cohort | None, statuses: dict[tuple[str, str], Any]
) -> fairness.Facts:
    """A queue (``parent``: its cohort) or a cohort with the status the poll saw of it."""
    return fairness.Facts(
        obj.name,
        parent.name if parent else "",
        obj.fair_sharing_weight,
        obj.resource_groups,
        statuses.get((type(obj).__name__, obj.name), {}),
    )


def _my_namespaces(user: Any) -> set[tuple[int, str]] | None:
    """The namespaces, as (cluster id, name), whose workloads the user may see by name
    (None: every one)."""
    if sees_every_team(user):
        return None
    return set(
        Namespace.objects.filter(team__memberships__user_id=user_id(user)).values_list(
            "cluster_id", "name"
        )
    )


def _queue_entry(
    cq: ClusterQueue,
    fact: fairness.Facts,
    rows: list[fairness.Row],
    waiting: list[ObservedWorkload],
    mine: set[tuple[int, str]] | None,
) -> dict[str, Any]:
    status = fact.status
    quota = quota_rows(cq, dict(status))
    for row, lends in zip(quota, rows, strict=True):
        row["lent"] = lends.lent
    for workload in waiting:
        workload.shown = mine is None or (workload.cluster_id, workload.namespace) in mine  # type: ignore[attr-defined]
    return {
        "cq": cq,
        "rows": quota,
        "share": fairness.share_of(cq.fair_sharing_weight, status),
        "pending": status.get("pendingWorkloads"),
        "admitted": status.get("admittedWorkloads"),
        "waiting": waiting,
        "waiting_count": waiting[0].waiting_in_queue if waiting else 0,  # type: ignore[attr-defined]
    }


def _local_queues(user: Any, cluster: Cluster, *, of: set[str] | None = None) -> list[LocalQueue]:
    """The user's teams' LocalQueues on ``cluster`` (every team's for approvers and admins),
    each with ``observed``: Kueue's status of it from the last poll ({} before). ``of``:
    only those pointing at these ClusterQueues (by name)."""
    local_queues = (
        LocalQueue.objects.filter(namespace__cluster=cluster)
        .select_related("namespace__team", "cluster_queue")
        .order_by("namespace__team__slug", "namespace__name", "name")
    )
    if of is not None:
        local_queues = local_queues.filter(cluster_queue__name__in=sorted(of))
    if not sees_every_team(user):
        local_queues = local_queues.filter(namespace__team__memberships__user_id=user_id(user))
    out = list(local_queues)
    # Their statuses only (a large cluster has thousands of LocalQueues: the page shows few).
    statuses = (
        {
            (o.namespace, o.name): o.status
            for o in ObservedObject.objects.on(cluster)
            .filter(
                kind="LocalQueue",
                namespace__in={lq.namespace.name for lq in out},
                name__in={lq.name for lq in out},
            )
            .only("namespace", "name", "status")
        }
        if out
        else {}
    )
    for lq in out:
        lq.observed = statuses.get((lq.namespace.name, lq.name), {})  # type: ignore[attr-defined]
    return out
