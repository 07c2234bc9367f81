"""Why is it waiting: the waiting workloads, Pending pods and refused pod creations of some
namespaces, each with its explanation (the home page and the API show the same words)."""

from __future__ import annotations

import datetime as dt
import re
import time
from collections.abc import Mapping
from typing import Any

from django.conf import settings
from django.db.models import Count, Max
from django.utils import timezone

from changes.facts import custom_configs
from changes.models import MigChangeRequest
from cluster.models import (
    ObservedCreateFailure,
    ObservedNode,
    ObservedObject,
    ObservedPod,
    ObservedPodGroup,
    ObservedWorkload,
)
from cluster.selectors import open_drift
from diagnostics.explain import (
    FleetView,
    Gang,
    Waiting,
    explain_admitted,
    explain_create_failure,
    explain_gang,
    explain_pod,
    explain_workload,
    fleet_view,
)
from fleet.models import MigConfig, NodePool
from gpus.catalog import model_for_product, promised_resources
from queues.models import LocalQueue

_QUOTA_NAMED = re.compile(r"exceeded quota: ([^,]+),")
CHANGING = ["approved", "running", "scheduled"]  # requests that are reconfiguring nodes


def waiting_in_namespaces(
    namespaces: list[str], pods: list[ObservedPod] | None = None
) -> tuple[list[ObservedWorkload], list[ObservedPod]]:
    """Workloads not admitted and Pending pods of these namespaces, with the reason
    (``pods``: the Pending pods, when the caller has read them already)."""
    workloads = list(
        ObservedWorkload.objects.filter(namespace__in=namespaces, finished=False).order_by(
            "admitted", "namespace", "created_at"
        )
    )
    if pods is None:
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
    return (
        tuple(
            ObservedNode.objects.aggregate(
                n=Count("id"), changed=Max("last_changed"), gone=Max("gone_since")
            ).values()
        ),
        tuple(NodePool.objects.order_by("pk").values_list("pk", "node_selector", "mig_config")),
        tuple(MigConfig.objects.order_by("pk").values_list("pk", "name", "devices")),
        tuple(
            MigChangeRequest.objects.filter(state__in=CHANGING)
            .order_by("pk")
            .values_list("pk", "updated_at")
        ),
        tuple(open_drift().values_list("pk", flat=True)),  # new or resolved drift
    )


def explainer_view() -> FleetView:
    """The fleet as the explainer sees it, rebuilt only when the fleet, pools, configs, open
    changes or drift changed (a fixed number of small queries otherwise), and that checked at
    most every QM_EXPLAINER_RECHECK_SECONDS per process (the fleet itself is polled every
    QM_POLL_SECONDS: a second or two adds nothing to what a page can know)."""
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


def _build_explainer_view() -> FleetView:
    nodes = list(ObservedNode.objects.filter(gone_since__isnull=True))
    pools = list(NodePool.objects.exclude(mig_config=""))
    custom = custom_configs()
    cache: dict[tuple[str, str | None, int], dict[str, int] | None] = {}
    promised: dict[str, dict[str, int]] = {}
    for node in nodes:
        pool = next((p for p in pools if p.selects(node.labels)), None)
        if pool is None:
            continue
        model = model_for_product(node.gpu_product) if node.gpu_product else None
        key = (pool.mig_config, model, node.gpu_count)
        if key not in cache:
            cache[key] = promised_resources(
                pool.mig_config,
                node=node.name,
                model=model,
                gpu_count=node.gpu_count,
                custom=custom,
            )[0]
        if cache[key]:
            promised[node.name] = dict(cache[key] or {})
    changing = {}
    for pk, held in MigChangeRequest.objects.filter(state__in=CHANGING).values_list("pk", "nodes"):
        for name in held:
            changing[name] = pk
    return fleet_view(nodes, [], pools, list(open_drift()), changing, promised)


def gangs_of(pods: list[ObservedPod]) -> dict[tuple[str, str], Gang]:
    """The gangs these pods belong to, with where their members are (two queries)."""
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


def _waiting(workload: ObservedWorkload, now: dt.datetime, pending: dict[str, int]) -> Waiting:
    since = workload.queued_at or workload.created_at
    requeue = workload.requeue_at
    return Waiting(
        waited_s=int((now - since).total_seconds()) if since else None,
        pending=pending.get(workload.cluster_queue),
        evictions=workload.evictions,
        evicted_reason=workload.evicted_reason,
        evicted=workload.evicted_at is not None,
        requeue_in_s=int((requeue - now).total_seconds()) if requeue and requeue > now else None,
    )


def _pending_per_cluster_queue(workloads: list[ObservedWorkload]) -> dict[str, int]:
    """ClusterQueue -> its status.pendingWorkloads, read (one query) only when a workload
    waits without a word from Kueue and without a place in line."""
    if not any(not w.admitted and not w.message and w.position is None for w in workloads):
        return {}
    return {
        name: int(status.get("pendingWorkloads") or 0)
        for name, status in ObservedObject.objects.filter(kind="ClusterQueue").values_list(
            "name", "status"
        )
    }


def _explain_pods(pods: list[ObservedPod]) -> None:
    gangs = gangs_of([p for p in pods if p.group_name])
    view = explainer_view()
    for pod in pods:
        gang = gangs.get((pod.namespace, pod.group_name))
        if gang is not None:
            pod.why = explain_gang(  # type: ignore[attr-defined]
                namespace=pod.namespace, name=pod.name, gang=gang
            )
        else:
            pod.why = explain_pod(  # type: ignore[attr-defined]
                namespace=pod.namespace,
                name=pod.name,
                requests=pod.gpu_requests,
                message=pod.pending_message,
                fleet=view,
                node_name=pod.node_name,
                defaulted=pod.limit_defaulted,
            )
        if pod.workload_name:
            where = f" in queue {pod.queue_name}" if pod.queue_name else ""
            pod.why.belongs_to = f"workload {pod.workload_name}{where}"  # type: ignore[attr-defined]
        elif pod.queue_name:
            pod.why.belongs_to = f"queue {pod.queue_name}"  # type: ignore[attr-defined]


def explain_waiting(
    namespaces: list[str],
    *,
    quotas: Mapping[tuple[str, str], Mapping[str, Any]] | None = None,
    pods: list[ObservedPod] | None = None,
) -> tuple[list[ObservedWorkload], list[ObservedPod], list[ObservedCreateFailure]]:
    """What waits in these namespaces, each waiting workload and pod with ``.why`` (an
    ``Explanation``; None for an admitted workload with nothing in its way): the home page
    and the API show the same words. An admitted workload whose pod is stuck gets the
    pod's explanation (Kueue names the workload on its pods). ``quotas``, (namespace,
    ResourceQuota) -> its observed status, is what a page already read (its bars count
    from it); without it, the quotas a refusal names are read here (one query). ``pods``
    are the Pending pods of these namespaces, ordered by namespace and name, when the caller
    read them already (the home, with its running ones)."""
    workloads, pods = waiting_in_namespaces(namespaces, pods)
    now = timezone.now()
    cq_of: dict[tuple[str, str], str] = {}
    if any(not w.cluster_queue for w in workloads):
        cq_of = {
            (ns, lq): cq
            for ns, lq, cq in LocalQueue.objects.filter(namespace__name__in=namespaces).values_list(
                "namespace__name", "name", "cluster_queue__name"
            )
        }
    if pods:
        _explain_pods(pods)
    stuck = {(p.namespace, p.workload_name): p for p in pods if p.workload_name}
    pending = _pending_per_cluster_queue(workloads)
    for workload in workloads:
        cluster_queue = workload.cluster_queue or cq_of.get(
            (workload.namespace, workload.queue_name), ""
        )
        pod = stuck.get((workload.namespace, workload.name))
        if workload.admitted:
            since = workload.admitted_at
            workload.why = explain_admitted(  # type: ignore[attr-defined]
                cluster_queue=cluster_queue,
                pod=pod.name if pod is not None else "",
                pod_why=getattr(pod, "why", None),
                pods_ready=workload.pods_ready,
                admitted_s=int((now - since).total_seconds()) if since else None,
            )
            continue
        workload.cluster_queue = cluster_queue
        workload.why = explain_workload(  # type: ignore[attr-defined]
            namespace=workload.namespace,
            name=workload.name,
            queue=workload.queue_name,
            reason=workload.reason,
            message=workload.message,
            position=workload.position,
            cluster_queue=cluster_queue,
            waiting=_waiting(workload, now, pending),
        )
    return workloads, pods, _create_failures(namespaces, now, quotas)


def observed_quotas(namespaces: list[str]) -> dict[tuple[str, str], dict[str, Any]]:
    """(namespace, ResourceQuota) -> its status as last polled (``hard``, ``used``)."""
    return {
        (ns, name): status or {}
        for ns, name, status in ObservedObject.objects.filter(
            kind="ResourceQuota", namespace__in=namespaces
        ).values_list("namespace", "name", "status")
    }


def _create_failures(
    namespaces: list[str],
    now: dt.datetime,
    quotas: Mapping[tuple[str, str], Mapping[str, Any]] | None,
) -> list[ObservedCreateFailure]:
    """Controllers whose pods the API server refuses, counted against the quotas as last
    polled. The poll drops a failure whose Job is gone; the Job controller retries with
    back-off, so an event older than that is history (a kind the poll cannot check)."""
    recent = now - dt.timedelta(minutes=15)
    failures = list(
        ObservedCreateFailure.objects.filter(namespace__in=namespaces, last_seen__gte=recent)
    )
    if failures and quotas is None:
        quotas = observed_quotas(sorted({f.namespace for f in failures}))
    for failure in failures:
        failure.why = explain_create_failure(  # type: ignore[attr-defined]
            namespace=failure.namespace,
            kind=failure.kind,
            name=failure.name,
            message=failure.message,
            observed=_refusing_quota(failure, quotas or {}),
        )
    return failures


def _refusing_quota(
    failure: ObservedCreateFailure, quotas: Mapping[tuple[str, str], Mapping[str, Any]]
) -> Mapping[str, Any] | None:
    """The observed status of the ResourceQuota a refusal names, if the poll saw it."""
    named = _QUOTA_NAMED.search(failure.message)
    return quotas.get((failure.namespace, named[1])) if named else None
