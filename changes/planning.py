"""The MIG layout planner in the portal: the demand and the fleet gathered from observed
state and desired quotas (a fixed number of queries), the plan of :mod:`changes.planner`,
the MIG change requests it becomes, one per pool and target config, each assessed and
approved as any other.

What counts as demand, per resource and the pools that may serve it:

- what runs now (the GPU pods on the pools' nodes), served before anything else, but for
  what runs on a node drifted from its pool's intended config (the seed's incident: a test
  layout left on a training node), which is ordinary demand;
- what waits: Pending pods (any pool whose GPU model offers the resource; a pod asking more
  than any one node could ever offer is left out, and said) and Kueue workloads not
  admitted (the pools behind their ClusterQueue's flavors);
- what the queues promise: each ClusterQueue's nominal quota per flavor, as far as what runs
  behind that flavor does not already use it, and the increases open quota requests ask for.

A flavor's ``nvidia.com/mig.config`` label is left out when it picks pools: that label is
what the plan changes. A node a MIG change set lately (succeeded within
:data:`SETTLING`) is left as it is: the plan never undoes a change that just succeeded.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.utils import timezone

from changes import impact
from changes.approval import User, may_request
from changes.facts import fleet_facts
from changes.mig import request_mig_change, served_by_dra
from changes.models import MigChangeRequest, QuotaChangeRequest
from changes.planner import (
    Demand,
    Plan,
    PlanNode,
    PlanPool,
    Problem,
    plan,
    shortfall_sentence,
)
from cluster.models import Cluster, ObservedNode, ObservedWorkload
from fleet import membership
from fleet.models import NodePool
from gpus import labels as gpu_labels
from gpus.catalog import most_per_gpu
from health.models import NodeHealth
from portal.access.permissions import is_platform_admin, sees_every_team
from portal.access.selectors import pod_names_for
from portal.audit.record import Event, record_audit
from portal.vocabulary.errors import DomainError
from portal.vocabulary.names import selector_matches
from tenants.models import Team

PAGE_SECONDS = 3.0  # the solver's time limit when a page or the API asks
SETTLING = dt.timedelta(hours=24)  # a node a MIG change set within this is left alone


@dataclass
class Planned:
    """A plan with what it was made from: the cluster and its fleet facts, and the batches
    it becomes."""

    cluster: Cluster
    plan: Plan
    problem: Problem
    fleet: impact.Fleet
    batches: list[dict[str, Any]]
    fingerprint: str


def may_see_planner(user: User) -> bool:
    """Platform admins; approvers and team leads read it."""
    return sees_every_team(user) or may_request(user)


def gather(cluster: Cluster) -> tuple[Problem, impact.Fleet]:
    """The planner's input for ``cluster`` from its observed tables (a fixed number of
    queries; no row of another cluster, whose nodes may have the same names)."""
    fleet = fleet_facts(cluster=cluster)
    observed = {
        name: (cordoned, strategy)
        for name, cordoned, strategy in ObservedNode.objects.on(cluster)
        .filter(gone_since__isnull=True)
        .values_list("name", "unschedulable", "mig_strategy")
    }
    unhealthy = {
        row.node: tuple(
            sorted(
                {
                    int(f["gpu"])
                    for f in row.findings
                    if f.get("severity") == "critical" or f.get("needs_drain")
                }
            )
        )
        for row in NodeHealth.objects.filter(cluster=cluster)
    }
    pool_of = {
        node.name: getattr(membership.pool_of(node.labels, fleet.pools), "name", "")
        for node in fleet.nodes
    }
    left = {**_served_by_dra(cluster, fleet), **_settled(cluster)}
    nodes = _plan_nodes(fleet, pool_of, observed, unhealthy, left)
    pools = [
        PlanPool(
            p.name,
            mixed=not p.mig_config,
            reason=f"its intended config is {p.mig_config}" if p.mig_config else "",
        )
        for p in fleet.pools
    ]
    waiting = list(
        ObservedWorkload.objects.on(cluster)
        .filter(admitted=False, finished=False)
        .values_list("namespace", "name", "cluster_queue", "requests")
    )
    asked = list(
        QuotaChangeRequest.objects.filter(
            cluster=cluster, state=QuotaChangeRequest.State.PENDING, kind="queue"
        ).values_list("pk", "cluster_queue_name", "flavor", "resource", "previous", "requested")
    )
    notes: list[str] = []
    demand = gather_demand(fleet, pool_of, waiting, asked, notes)
    return Problem(nodes, demand, pools, fleet.custom_configs, notes), fleet


def _served_by_dra(cluster: Cluster, fleet: impact.Fleet) -> dict[str, str]:
    """The nodes whose GPUs a DRA driver publishes and no device plugin offers (node -> why
    it is left alone): their MIG devices are the driver's, carved per claim, never a MIG
    config the MIG Manager applies (``changes.mig.served_by_dra``, which refuses a change
    asked on them)."""
    return {
        name: (
            f"{name} serves its GPUs through DRA: its MIG devices are the DRA driver's "
            "(carved per claim), not a MIG config: left as it is."
        )
        for name in served_by_dra(cluster, [n.name for n in fleet.nodes])
    }


def _settled(cluster: Cluster) -> dict[str, str]:
    """The nodes a MIG change set lately (node -> why it is left alone)."""
    since = timezone.now() - SETTLING
    out: dict[str, str] = {}
    for pk, nodes, config in (
        MigChangeRequest.objects.filter(
            cluster=cluster, state=MigChangeRequest.State.SUCCEEDED, updated_at__gte=since
        )
        .order_by("updated_at")
        .values_list("pk", "nodes", "target_config")
    ):
        for node in nodes:
            out[node] = (
                f"{node} was set to {config} by MIG change #{pk} within the last "
                f"{int(SETTLING.total_seconds() // 3600)} hours: left as it is."
            )
    return out


def _plan_nodes(
    fleet: impact.Fleet,
    pool_of: Mapping[str, str],
    observed: Mapping[str, tuple[bool, str]],
    unhealthy: Mapping[str, tuple[int, ...]],
    settled: Mapping[str, str],
) -> list[PlanNode]:
    pods: dict[str, list[str]] = defaultdict(list)
    used: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for pod in fleet.pods:
        if pod.node and pod.phase in ("Running", "Pending") and pod.gpu:
            pods[pod.node].append(f"{pod.namespace}/{pod.name}")
            for resource, count in pod.gpu.items():
                used[pod.node][resource] += int(count)
    return [
        PlanNode(
            name=node.name,
            pool=pool_of.get(node.name, ""),
            model=node.model,
            gpu_count=node.gpu_count,
            config=node.mig_config,
            offer=dict(node.allocatable),
            pods=tuple(sorted(pods[node.name])),
            used=dict(used[node.name]),
            unhealthy=unhealthy.get(node.name, ()),
            cordoned=observed.get(node.name, (False, ""))[0],
            busy=fleet.busy.get(node.name),
            strategy=observed.get(node.name, (False, ""))[1] or "mixed",
            settled=settled.get(node.name, ""),
        )
        for node in fleet.nodes
        if node.model or node.allocatable
    ]


def _flavor_pools(fleet: impact.Fleet, pool_of: Mapping[str, str]) -> dict[str, tuple[str, ...]]:
    """The pools behind each flavor: those with a node its labels pick (MIG config aside)."""
    out = {}
    for flavor, node_labels in fleet.flavors.items():
        wanted = {k: v for k, v in node_labels.items() if k != gpu_labels.MIG_CONFIG}
        out[flavor] = tuple(
            sorted(
                {
                    pool_of.get(n.name, "")
                    for n in fleet.nodes
                    if selector_matches(wanted, n.labels) and n.model
                }
            )
        )
    return out


def gather_demand(
    fleet: impact.Fleet,
    pool_of: Mapping[str, str],
    waiting: Sequence[tuple[str, str, str, Mapping[str, Any]]],
    asked: Sequence[tuple[int, str, str, str, str, str]],
    notes: list[str] | None = None,
) -> list[Demand]:
    """Demand per resource and the pools that may serve it (see the module's docstring);
    ``notes`` gets what is left out, and why."""
    behind = _flavor_pools(fleet, pool_of)
    drifted = _drifted(fleet)
    demand: list[Demand] = []
    running: dict[tuple[str, str, bool], int] = defaultdict(int)  # (pool, resource, kept)
    for pod in fleet.pods:
        for resource, count in pod.gpu.items():
            if not resource.startswith("nvidia.com/") or int(count) <= 0:
                continue
            if pod.node and pod.phase == "Running":
                pool = pool_of.get(pod.node, "")
                running[(pool, resource, pod.node not in drifted)] += int(count)
            elif pod.phase == "Pending" and not pod.node:
                pools = _pools_offering(fleet, pool_of, resource)
                most = _most_on_one_node(fleet, resource)
                if int(count) > most:  # no layout of any node serves it: no demand
                    if notes is not None:
                        notes.append(
                            f"{pod.namespace}/{pod.name} asks for {count} x {resource} in one "
                            f"pod; no node can ever offer more than {most}: no layout serves "
                            "it, so the plan leaves it out."
                        )
                    continue
                demand.append(
                    Demand(resource, int(count), pools, f"Pending {pod.namespace}/{pod.name}")
                )
    for (pool, resource, kept), count in sorted(running.items()):
        source = "running pods" if kept else "running pods on a node off its pool's config"
        demand.append(Demand(resource, count, (pool,), source, running=kept))
    flavors_of: dict[str, list[str]] = defaultdict(list)
    promised: dict[tuple[str, tuple[str, ...]], list[tuple[str, int]]] = defaultdict(list)
    for quota in fleet.queues:
        flavors_of[quota.cluster_queue].append(quota.flavor)
        pools = behind.get(quota.flavor, ())
        promised[(quota.resource, pools)].append((quota.cluster_queue, quota.nominal))
    for (resource, pools), queues in sorted(promised.items()):
        in_use = sum(
            running.get((pool, resource, kept), 0) for pool in pools for kept in (True, False)
        )
        beyond = sum(n for _, n in queues) - in_use
        if beyond > 0 and pools:
            names = ", ".join(sorted({q for q, n in queues if n}))
            demand.append(Demand(resource, beyond, pools, f"nominal quota of {names}"))
    for namespace, name, cluster_queue, requests in waiting:
        pools = tuple(sorted({p for f in flavors_of.get(cluster_queue, []) for p in behind[f]}))
        for resource, count in requests.items():
            if resource.startswith("nvidia.com/") and int(count) > 0:
                scope = pools or _pools_offering(fleet, pool_of, resource)
                demand.append(Demand(resource, int(count), scope, f"waiting {namespace}/{name}"))
    for pk, cluster_queue, flavor, resource, previous, requested in asked:
        more = _int(requested) - _int(previous)
        pools = behind.get(flavor, ())
        if more > 0 and pools and resource.startswith("nvidia.com/"):
            demand.append(Demand(resource, more, pools, f"quota request #{pk} ({cluster_queue})"))
    return demand


def _drifted(fleet: impact.Fleet) -> set[str]:
    """The nodes off their pool's intended config (the pool names one)."""
    out = set()
    for node in fleet.nodes:
        pool = membership.pool_of(node.labels, fleet.pools)
        intended = getattr(pool, "mig_config", "")
        if intended and node.mig_config and node.mig_config != intended:
            out.add(node.name)
    return out


def _most_on_one_node(fleet: impact.Fleet, resource: str) -> int:
    """The most of ``resource`` any one node of the fleet could ever offer."""
    return max(
        (most_per_gpu(n.model, resource) * n.gpu_count for n in fleet.nodes),
        default=0,
    )


def _pools_offering(
    fleet: impact.Fleet, pool_of: Mapping[str, str], resource: str
) -> tuple[str, ...]:
    return tuple(
        sorted(
            {pool_of.get(n.name, "") for n in fleet.nodes if most_per_gpu(n.model, resource) > 0}
        )
    )


def _int(value: str) -> int:
    return int(value) if str(value).isdigit() else 0


# ----------------------------------------------------------------------------- the plan


def make_plan(cluster: Cluster, *, seconds: float = PAGE_SECONDS) -> Planned:
    """The plan for ``cluster``'s fleet now, its batches (one per pool and target config)
    with the assessment each request would get, and a fingerprint of what it proposes (and
    on which cluster: a plan read on one is never asked for on another)."""
    problem, fleet = gather(cluster)
    result = plan(problem, time_limit=seconds)
    groups: dict[tuple[str, str], list[str]] = defaultdict(list)
    for node in result.changed:
        groups[(node.pool, node.config_after)].append(node.name)
    batches = []
    for (pool, config), names in sorted(groups.items()):
        assessed = impact.assess(fleet, targets=names, config=config)
        batches.append(
            {
                "pool": pool,
                "target_config": config,
                "nodes": names,
                "verdict": assessed.verdict,
                "verdict_label": assessed.verdict_label,
                "reasons": list(assessed.reasons),
                "queue_changes": [q.as_json() for q in assessed.proposed_queue_changes],
            }
        )
    shown = [{k: b[k] for k in ("pool", "target_config", "nodes")} for b in batches]
    proposed = json.dumps([cluster.name, shown], sort_keys=True).encode()
    fingerprint = hashlib.sha256(proposed).hexdigest()[:16]
    return Planned(cluster, result, problem, fleet, batches, fingerprint)


def plan_for(viewer: User, planned: Planned) -> dict[str, Any]:
    """The plan as ``viewer`` may read it: other teams' pods and workloads counted, never
    named (in what it evicts, what stays short, its notes and its requests' reasons)."""
    names = pod_names_for(viewer)
    on = planned.cluster.pk
    body = planned.plan.as_json()
    for node in body["nodes"]:
        node["evicts"] = [
            pod if names.named(on, pod.split("/", 1)[0]) else "(another team's pod)"
            for pod in node["evicts"]
        ]
    for shortfall in body["shortfalls"]:
        asking = counted(shortfall["sources"], names, on)
        shortfall["sources"] = asking
        total = shortfall["demand"]
        shortfall["sentence"] = shortfall_sentence(
            shortfall["resource"], total, total - shortfall["count"], shortfall["pools"], asking
        )
    body["notes"] = [names.redact(note, on) for note in body["notes"]]
    body["cluster"] = planned.cluster.name
    body["batches"] = [
        {**batch, "reasons": [names.redact(r, on) for r in batch["reasons"]]}
        for batch in planned.batches
    ]
    body["fingerprint"] = planned.fingerprint
    return body


def counted(sources: Sequence[str], names: Any, cluster: int) -> list[str]:
    """What asks for a shortfall on ``cluster`` as a reader may see it: their own teams' pods and
    workloads by name, other teams' counted per kind and namespace ("2 Pending pods in
    team-b"), never named."""
    shown: list[str] = []
    hidden: dict[tuple[str, str], int] = defaultdict(int)
    for source in sources:
        kind, _, ref = source.partition(" ")
        namespace = ref.split("/", 1)[0] if "/" in ref else ""
        if kind in ("Pending", "waiting") and namespace and not names.named(cluster, namespace):
            hidden[(kind, namespace)] += 1
        else:
            shown.append(source)
    for (kind, namespace), n in sorted(hidden.items()):
        what = "Pending pod" if kind == "Pending" else "waiting workload"
        shown.append(f"{n} {what}{'' if n == 1 else 's'} in {namespace}")
    return shown


@transaction.atomic
def request_planned_changes(
    *,
    actor: User,
    cluster: Cluster,
    team: Team | None,
    reason: str,
    seen: str,
    source: str = "web",
) -> list[MigChangeRequest]:
    """Turn ``cluster``'s plan into MIG change requests (one per pool and target config),
    each assessed and pending approval as if asked for by hand. The plan is made anew; when
    it differs from the one the admin saw (``seen``, its fingerprint), nothing is asked and
    the admin reads the new one. All requests or none."""
    if not is_platform_admin(actor):
        raise PermissionDenied("Only platform admins turn a plan into MIG change requests.")
    errors: dict[str, list[str]] = {}
    if team is None:
        errors["team"] = ["Choose the team the requests are asked for."]
    if not reason.strip():
        errors["reason"] = ["Say why: approvers and the teams on these nodes read it."]
    if errors or team is None:
        raise ValidationError(errors)
    planned = make_plan(cluster)
    if planned.fingerprint != seen:
        raise DomainError(
            "The plan changed since it was shown (the fleet or the demand moved): read the "
            "new plan and ask again.",
            code="stale_plan",
        )
    if not planned.batches:
        raise DomainError("The plan changes no node: there is nothing to ask for.", code="empty")
    pools = {
        p.name: p
        for p in NodePool.objects.filter(
            cluster=cluster, name__in=[b["pool"] for b in planned.batches]
        )
    }
    requests = [
        request_mig_change(
            actor=actor,
            team=team,
            nodes=batch["nodes"],
            target_config=batch["target_config"],
            reason=f"{reason.strip()} (MIG layout planner, plan {planned.fingerprint})",
            pool=pools.get(batch["pool"]),
            cluster=cluster,
            source=source,
        )
        for batch in planned.batches
    ]
    record_audit(
        actor=actor,
        event=Event.MIG_PLAN_REQUESTED,
        source=source,
        team=team,
        new={
            "cluster": cluster.name,
            "fingerprint": planned.fingerprint,
            "requests": [r.pk for r in requests],
            "batches": [
                {k: b[k] for k in ("pool", "target_config", "nodes")} for b in planned.batches
            ],
        },
    )
    return requests
