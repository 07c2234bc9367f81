"""Reads of the observed fleet (the same for every signed-in user: nodes are not team data)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

from django.db.models import QuerySet

from fleet.layout import gpu_strips
from fleet.models import (
    Drift,
    NodeHealth,
    NodePool,
    ObservedNode,
    ObservedPod,
    ObservedWorkload,
)
from sync.models import AppliedObject, SyncRun


@dataclass
class PoolView:
    name: str
    mig_config: str
    purpose: str
    nodes: list[ObservedNode] = field(default_factory=list)
    total: int = 0  # nodes in the pool (matching the search), before the page's cap

    @property
    def hidden(self) -> int:
        return self.total - len(self.nodes)


def needs_attention(
    node: ObservedNode, pool: PoolView, unhealthy: frozenset[str] = frozenset()
) -> bool:
    return (
        node.name in unhealthy
        or not node.ready
        or node.unschedulable
        or node.mig_config_state in ("failed", "pending")
        or bool(pool.mig_config and node.mig_config != pool.mig_config)
    )


def fleet_by_pool(*, search: str = "", pool: str = "", cap: int | None = None) -> list[PoolView]:
    """Nodes grouped by the first pool whose selector matches (two queries in all: pools,
    then nodes).

    ``search`` keeps nodes whose name contains it, ``pool`` keeps one pool. With ``cap``,
    each pool keeps that many nodes, those needing attention (not ready, cordoned, MIG
    failed or reconfiguring, drifted) first; ``total`` says how many there were.
    """
    grouped = fleet_by_pool_all(search)
    if pool:
        grouped = [p for p in grouped if p.name == pool]
    unhealthy = frozenset(
        NodeHealth.objects.filter(worst__in=("warning", "critical")).values_list("node", flat=True)
    )
    for view in grouped:
        view.total = len(view.nodes)
        if cap is not None and view.total > cap:
            view.nodes.sort(
                key=lambda node: (not needs_attention(node, view, unhealthy), node.name)
            )
            view.nodes = view.nodes[:cap]
    attach_health([node for view in grouped for node in view.nodes])
    return grouped


def attach_health(nodes: list[ObservedNode]) -> None:
    """Each node's last GPU health (or None) and its GPUs drawn as strips (one query)."""
    health = {h.node: h for h in NodeHealth.objects.filter(node__in=[n.name for n in nodes])}
    for node in nodes:
        row = health.get(node.name)
        node.health = row  # type: ignore[attr-defined]
        utils = [
            g["util"] for g in (row.gpus if row is not None else []) if g.get("util") is not None
        ]
        node.gpu_util = round(sum(utils) / len(utils)) if utils else None  # type: ignore[attr-defined]
        node.strips = gpu_strips(  # type: ignore[attr-defined]
            product=node.gpu_product,
            gpu_count=node.gpu_count,
            mig_config=node.mig_config,
            allocated={k: int(v) for k, v in node.allocated.items() if str(v).isdigit()},
            health_gpus=row.gpus if row is not None and row.gpus else None,
        )


def fleet_by_pool_all(search: str = "") -> list[PoolView]:
    rows = list(NodePool.objects.all())
    pools = [PoolView(p.name, p.mig_config, p.get_purpose_display()) for p in rows]
    selectors = [p.node_selector for p in rows]
    other = PoolView("(no pool)", "", "")
    nodes = ObservedNode.objects.filter(gone_since__isnull=True).order_by("name")
    if search:
        nodes = nodes.filter(name__icontains=search)
    for node in nodes:
        for pool, selector in zip(pools, selectors, strict=True):
            if selector and all(node.labels.get(k) == v for k, v in selector.items()):
                pool.nodes.append(node)
                break
        else:
            other.nodes.append(node)
    return [p for p in [*pools, other] if p.nodes or (p.name != "(no pool)" and not search)]


def open_drift() -> QuerySet[Drift]:
    return Drift.objects.filter(resolved_at__isnull=True).order_by("kind", "subject")


def last_sync() -> SyncRun | None:
    return SyncRun.objects.order_by("-started_at").first()


def apply_problems() -> QuerySet[AppliedObject]:
    return AppliedObject.objects.exclude(outcome=AppliedObject.Outcome.APPLIED).order_by(
        "kind", "name"
    )


def waiting_in_namespaces(
    namespaces: list[str],
) -> tuple[list[ObservedWorkload], list[ObservedPod]]:
    """Workloads not admitted and Pending pods of these namespaces, with the reason."""
    workloads = list(
        ObservedWorkload.objects.filter(namespace__in=namespaces, finished=False).order_by(
            "admitted", "namespace", "created_at"
        )
    )
    pods = list(
        ObservedPod.objects.filter(namespace__in=namespaces, phase="Pending").order_by(
            "namespace", "name"
        )
    )
    return workloads, pods


_EXPLAINER: dict[str, Any] = {}


def _explainer_version() -> tuple[Any, ...]:
    """What the explainer's view is built from, summed up in a few small aggregate queries:
    when none of it changed, the view built last time is still right."""
    from django.db.models import Count, Max

    from fleet.models import MigChangeRequest, MigConfig

    return (
        tuple(
            ObservedNode.objects.aggregate(
                n=Count("id"), changed=Max("last_changed"), gone=Max("gone_since")
            ).values()
        ),
        tuple(NodePool.objects.order_by("pk").values_list("pk", "node_selector", "mig_config")),
        tuple(MigConfig.objects.order_by("pk").values_list("pk", "name", "devices")),
        tuple(
            MigChangeRequest.objects.filter(state__in=["approved", "running", "scheduled"])
            .order_by("pk")
            .values_list("pk", "updated_at")
        ),
        tuple(open_drift().values_list("pk", flat=True)),  # new or resolved drift
    )


def explainer_view() -> Any:
    """The fleet as the explainer sees it, rebuilt only when the fleet, pools, configs, open
    changes or drift changed (a fixed number of small queries otherwise), and that checked at
    most every QM_EXPLAINER_RECHECK_SECONDS per process (the fleet itself is polled every
    QM_POLL_SECONDS: a second or two adds nothing to what a page can know)."""
    import time

    from django.conf import settings

    now = time.monotonic()
    if "view" in _EXPLAINER and now - _EXPLAINER.get("checked", 0.0) < (
        settings.QM_EXPLAINER_RECHECK_SECONDS
    ):
        return _EXPLAINER["view"]
    version = _explainer_version()
    if _EXPLAINER.get("version") != version:
        _EXPLAINER["view"] = _build_explainer_view()
        _EXPLAINER["version"] = version
    _EXPLAINER["checked"] = now
    return _EXPLAINER["view"]


def _build_explainer_view() -> Any:
    from fleet.catalog import model_for_product
    from fleet.explain import fleet_view
    from fleet.impact import Fleet, NodeFacts, promised_resources
    from fleet.models import MigChangeRequest, MigConfig

    nodes = list(ObservedNode.objects.filter(gone_since__isnull=True))
    pools = list(NodePool.objects.exclude(mig_config=""))
    custom = Fleet(
        nodes=[], custom_configs={c.name: (c.gpu_model, c.devices) for c in MigConfig.objects.all()}
    )
    cache: dict[tuple[str, str | None, int], dict[str, int] | None] = {}
    promised: dict[str, dict[str, int]] = {}
    for node in nodes:
        pool = next((p for p in pools if p.selects(node.labels)), None)
        if pool is None:
            continue
        model = model_for_product(node.gpu_product) if node.gpu_product else None
        key = (pool.mig_config, model, node.gpu_count)
        if key not in cache:
            facts = NodeFacts(node.name, model, node.gpu_count, "", "", {}, {})
            cache[key] = promised_resources(pool.mig_config, facts, custom)[0]
        if cache[key]:
            promised[node.name] = dict(cache[key] or {})
    changing = {}
    for request in MigChangeRequest.objects.filter(state__in=["approved", "running", "scheduled"]):
        for name in request.nodes:
            changing[name] = request.pk
    return fleet_view(nodes, [], pools, list(open_drift()), changing, promised)


def gangs_of(pods: list[ObservedPod]) -> dict[tuple[str, str], Any]:
    """The gangs these pods belong to, with where their members are (two queries)."""
    from fleet.explain import Gang
    from fleet.models import ObservedPodGroup

    keys = {(p.namespace, p.group_name) for p in pods}
    if not keys:
        return {}
    namespaces = {k[0] for k in keys}
    names = {k[1] for k in keys}
    groups = {
        (g.namespace, g.name): g
        for g in ObservedPodGroup.objects.filter(namespace__in=namespaces, name__in=names)
    }
    members: dict[tuple[str, str], list[ObservedPod]] = {}
    for member in ObservedPod.objects.filter(namespace__in=namespaces, group_name__in=names):
        members.setdefault((member.namespace, member.group_name), []).append(member)
    out = {}
    for key, group in groups.items():
        if key not in keys:
            continue
        running = [m for m in members.get(key, []) if m.phase == "Running"]
        held: dict[str, int] = {}
        for member in running:
            for resource, count in member.gpu_requests.items():
                held[resource] = held.get(resource, 0) + int(count)
        out[key] = Gang(
            name=group.name,
            queue=group.queue,
            min_member=group.min_member,
            running=len(running),
            pending=sum(1 for m in members.get(key, []) if m.phase == "Pending"),
            held=held,
            min_resources=group.min_resources,
            message=group.message,
        )
    return out


def explain_waiting(
    namespaces: list[str],
) -> tuple[list[ObservedWorkload], list[ObservedPod], list[Any]]:
    """What waits in these namespaces, each waiting workload and pod with ``.why`` (an
    ``Explanation``): the home page and the API show the same words."""
    from django.utils import timezone

    from fleet.explain import explain_create_failure, explain_gang, explain_pod, explain_workload
    from fleet.models import ObservedCreateFailure

    workloads, pods = waiting_in_namespaces(namespaces)
    gangs = gangs_of([p for p in pods if p.group_name])
    cq_of: dict[tuple[str, str], str] = {}
    if any(w.position is not None and not w.cluster_queue for w in workloads):
        from queues.models import LocalQueue

        cq_of = {
            (ns, lq): cq
            for ns, lq, cq in LocalQueue.objects.filter(namespace__name__in=namespaces).values_list(
                "namespace__name", "name", "cluster_queue__name"
            )
        }
    if workloads or pods:
        view = explainer_view()
        for pod in pods:
            gang = gangs.get((pod.namespace, pod.group_name))
            if gang is not None:
                pod.why = explain_gang(  # type: ignore[attr-defined]
                    namespace=pod.namespace, name=pod.name, gang=gang
                )
                continue
            pod.why = explain_pod(  # type: ignore[attr-defined]
                namespace=pod.namespace,
                name=pod.name,
                requests=pod.gpu_requests,
                message=pod.pending_message,
                fleet=view,
            )
        for workload in workloads:
            if not workload.admitted:
                workload.why = explain_workload(  # type: ignore[attr-defined]
                    namespace=workload.namespace,
                    name=workload.name,
                    queue=workload.queue_name,
                    reason=workload.reason,
                    message=workload.message,
                    position=workload.position,
                    cluster_queue=workload.cluster_queue
                    or cq_of.get((workload.namespace, workload.queue_name), ""),
                )
    # The Job controller retries with back-off: an event older than that is history.
    recent = timezone.now() - dt.timedelta(minutes=15)
    failures = list(
        ObservedCreateFailure.objects.filter(namespace__in=namespaces, last_seen__gte=recent)
    )
    for failure in failures:
        failure.why = explain_create_failure(  # type: ignore[attr-defined]
            namespace=failure.namespace,
            kind=failure.kind,
            name=failure.name,
            message=failure.message,
        )
    return workloads, pods, failures
