"""Kueue-style admission for the demo cluster: Workloads get quota from ClusterQueues.

A small, deterministic version of Kueue v0.19's scheduler: workloads are taken by priority,
then age; each resource group of a pod set gets the first flavor (in the ClusterQueue's order)
that fits all its resources, borrowing from the cohort up to ``borrowingLimit``. Conditions,
messages and events are Kueue's own (recorded in tests/data/kueue-samples), with the default
feature gates: ``QuotaReserved=False`` has reason ``Pending`` (or ``Inadmissible`` for missing
queues) and no ``Admitted`` condition until a workload was once admitted. Preemption and fair
sharing are in ``devcluster.preemption``.
"""

from __future__ import annotations

import copy
import datetime as dt
from collections import defaultdict
from collections.abc import Iterable
from fractions import Fraction
from typing import Any

import yaml

from devcluster import quantity, recorder
from devcluster.cluster import Cluster, Obj, now
from devcluster.resources import Resource, find
from devcluster.selectors import selector_matches, tolerates_taint

WORKLOADS = find("kueue.x-k8s.io", "v1beta2", "workloads")
CQS = find("kueue.x-k8s.io", "v1beta2", "clusterqueues")
LQS = find("kueue.x-k8s.io", "v1beta2", "localqueues")
FLAVORS = find("kueue.x-k8s.io", "v1beta2", "resourceflavors")
COHORTS = find("kueue.x-k8s.io", "v1beta2", "cohorts")
NAMESPACES = find("", "v1", "namespaces")
LIMITS = find("", "v1", "limitranges")
CONFIG_MAPS = find("", "v1", "configmaps")
CLAIM_TEMPLATES = find("resource.k8s.io", "v1", "resourceclaimtemplates")
# Where an install keeps Kueue's Configuration (Kueue's config/default), and its key.
KUEUE_CONFIG = ("kueue-system", "kueue-manager-config", "controller_manager_config.yaml")
API_VERSION = "kueue.x-k8s.io/v1beta2"
ADMISSION = "kueue-admission"
BINARY = {"memory", "ephemeral-storage"}
FINALIZER = "kueue.x-k8s.io/resource-in-use"

Usage = dict[tuple[str, str], Fraction]  # (flavor, resource) -> amount
Assignment = tuple[str, dict[str, str], dict[str, Fraction]]  # pod set, flavors, usage
_EMPTY: dict[str, Usage] = defaultdict(lambda: defaultdict(Fraction))


def _condition(
    kind: str,
    status: str,
    reason: str,
    message: str,
    previous: list[dict[str, Any]],
    generation: int = 1,
) -> dict[str, Any]:
    old = next((c for c in previous if c.get("type") == kind), None)
    stamp = old["lastTransitionTime"] if old and old.get("status") == status else now()
    return {
        "type": kind,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": stamp,
        "observedGeneration": generation,
    }


def set_condition(
    conditions: list[dict[str, Any]],
    kind: str,
    status: str,
    reason: str,
    message: str,
    generation: int = 1,
) -> list[dict[str, Any]]:
    """Conditions with ``kind`` set (in place of the old one, else appended), as
    ``meta.SetStatusCondition`` does; the transition time changes only with the status."""
    new = _condition(kind, status, reason, message, conditions, generation)
    out = [new if c.get("type") == kind else c for c in conditions]
    return out if any(c.get("type") == kind for c in conditions) else [*conditions, new]


def find_condition(workload: Obj, kind: str) -> dict[str, Any] | None:
    return next(
        (c for c in (workload.get("status") or {}).get("conditions") or [] if c["type"] == kind),
        None,
    )


def generation(obj: Obj) -> int:
    return int(obj["metadata"].get("generation") or 1)


def event(cluster: Cluster, workload: Obj, type_: str, reason: str, message: str) -> None:
    recorder.record(
        cluster,
        workload,
        kind="Workload",
        api_version=API_VERSION,
        type_=type_,
        reason=reason,
        message=message,
        component=ADMISSION,
    )


def webhook_create(resource: Resource, obj: Obj) -> None:
    """Kueue's mutating webhooks: ResourceFlavors and ClusterQueues get the finalizer that
    keeps them while in use."""
    if resource.group == "kueue.x-k8s.io" and resource.kind in ("ResourceFlavor", "ClusterQueue"):
        finalizers = obj["metadata"].setdefault("finalizers", [])
        if FINALIZER not in finalizers:
            finalizers.append(FINALIZER)


def limit_defaults(limit_ranges: Iterable[Obj]) -> tuple[dict[str, Any], dict[str, Any]]:
    """A namespace's Container ``default`` and ``defaultRequest`` (first LimitRange wins)."""
    limits: dict[str, Any] = {}
    requests: dict[str, Any] = {}
    for limit_range in limit_ranges:
        for item in (limit_range.get("spec") or {}).get("limits") or []:
            if item.get("type") == "Container":
                for name, value in (item.get("default") or {}).items():
                    limits.setdefault(name, value)
                for name, value in (item.get("defaultRequest") or {}).items():
                    requests.setdefault(name, value)
    return limits, requests


class Dra:
    """What Kueue's DRA integration (beta, on by default in 0.19) needs of the cluster: its
    Configuration's ``resources.deviceClassMappings`` (DeviceClass -> the resource it is
    charged in; the first mapping of a class wins) and the namespaces' ResourceClaimTemplates.
    Kueue reads its Configuration when it starts; the demo cluster reads the ConfigMap an
    install keeps it in whenever it changes (a test writes it and needs no restart)."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        namespace, name, key = KUEUE_CONFIG
        found = cluster.get(CONFIG_MAPS, namespace, name)
        version = str((found or {}).get("metadata", {}).get("resourceVersion", ""))
        read: tuple[str, dict[str, str]] = getattr(cluster, "_kueue_dra", ("", {}))
        if version != read[0]:  # parsed once per version of the ConfigMap
            read = (version, _mappings(((found or {}).get("data") or {}).get(key, "")))
            cluster._kueue_dra = read  # type: ignore[attr-defined]
        self.mappings = read[1]

    def charge(
        self, namespace: str, pod_set: Obj, index: int = 0
    ) -> tuple[dict[str, Fraction], str]:
        """What one pod of ``pod_set`` is charged for its claims (by the mapped resource),
        and Kueue's words when it cannot be charged ("" when it can)."""
        charged: dict[str, Fraction] = defaultdict(Fraction)
        spec = (pod_set.get("template") or {}).get("spec") or {}
        for claim_index, claim in enumerate(spec.get("resourceClaims") or []):
            where = f"spec.podSets[{index}].template.spec.resourceClaims[{claim_index}]"
            template_name = claim.get("resourceClaimTemplateName")
            if not template_name:
                return {}, "KueueDRAIntegration feature does not support use of resource claims"
            template = self.cluster.get(CLAIM_TEMPLATES, namespace, template_name)
            if template is None:
                return {}, (
                    f"{where}.resourceClaimTemplateName: Not found: "
                    f'"ResourceClaimTemplate {template_name} not found"'
                )
            requests = (((template.get("spec") or {}).get("spec") or {}).get("devices") or {}).get(
                "requests"
            ) or []
            for request in requests:
                exactly = request.get("exactly") or {}
                device_class = exactly.get("deviceClassName", "")
                if request.get("firstAvailable") or exactly.get("allocationMode") == "All":
                    return {}, f"{where}: unsupported DRA request {request.get('name', '')}"
                mapped = self.mappings.get(device_class)
                if mapped is None:
                    return {}, (
                        f"{where}.resourceClaimTemplateName: Not found: "
                        f'"DeviceClass {device_class} is not mapped in DRA configuration for '
                        f'podset {pod_set.get("name", "main")}"'
                    )
                charged[mapped] += int(exactly.get("count", 1))
        return dict(charged), ""


def _mappings(text: str) -> dict[str, str]:
    """DeviceClass -> resource, from a Configuration's YAML (the first mapping of a class
    wins); nothing when it names none or does not parse."""
    try:
        config = yaml.safe_load(text) or {}
    except yaml.YAMLError:
        return {}
    out: dict[str, str] = {}
    resources = config.get("resources") if isinstance(config, dict) else None
    for mapping in (resources or {}).get("deviceClassMappings") or []:
        for device_class in mapping.get("deviceClassNames") or []:
            out.setdefault(str(device_class), str(mapping.get("name", "")))
    return out


def requests_of(
    workload: Obj, limit_ranges: Iterable[Obj] = (), dra: Dra | None = None
) -> list[tuple[str, int, dict[str, Fraction]]]:
    """(pod set name, count, total requests) per pod set, as Kueue computes them: first the
    namespace's LimitRange defaults fill what a container leaves unset (``defaultRequest``
    for requests), then limits stand in for requests still missing. So a Job with only
    ``limits: {gpu: 20}`` in a namespace whose LimitRange defaults gpu to 1 is charged 1.
    With ``dra``, each pod's claims made from templates are charged in the resources their
    DeviceClasses map to (a pod set Kueue cannot charge so: ``dra_problem``)."""
    default_limits, default_requests = limit_defaults(limit_ranges)
    out = []
    namespace = workload["metadata"].get("namespace", "")
    for index, pod_set in enumerate((workload.get("spec") or {}).get("podSets") or []):
        count = int(pod_set.get("count", 1))
        per_pod: dict[str, Fraction] = defaultdict(Fraction)
        spec = (pod_set.get("template") or {}).get("spec") or {}
        for container in spec.get("containers") or []:
            resources = container.get("resources") or {}
            limits = {**default_limits, **(resources.get("limits") or {})}
            requests = {**default_requests, **(resources.get("requests") or {})}
            for name, value in {**limits, **requests}.items():
                per_pod[name] += quantity.parse(value)
        if dra is not None:
            for name, amount in dra.charge(namespace, pod_set, index)[0].items():
                per_pod[name] += amount
        out.append((pod_set.get("name", "main"), count, {k: v * count for k, v in per_pod.items()}))
    return out


def dra_problem(workload: Obj, dra: Dra) -> str:
    """Kueue's words when a pod set's claims cannot be charged ("" when they can)."""
    namespace = workload["metadata"].get("namespace", "")
    for index, pod_set in enumerate((workload.get("spec") or {}).get("podSets") or []):
        problem = dra.charge(namespace, pod_set, index)[1]
        if problem:
            return problem
    return ""


def fmt(resource: str, value: Fraction) -> str:
    """A quantity as Kueue prints it (memory-like amounts in binary units, e.g. ``1Gi``)."""
    return quantity.fmt(value, binary=resource in BINARY or resource.endswith("memory"))


def is_finished(workload: Obj) -> bool:
    finished = find_condition(workload, "Finished")
    return bool(finished and finished.get("status") == "True")


def admitted_to(workload: Obj) -> str:
    admission = (workload.get("status") or {}).get("admission") or {}
    return str(admission.get("clusterQueue") or "")


def in_backoff(workload: Obj, clock: dt.datetime | None = None) -> bool:
    """Evicted and waiting out its requeue backoff (``status.requeueState.requeueAt``)."""
    requeue_at = ((workload.get("status") or {}).get("requeueState") or {}).get("requeueAt")
    return bool(requeue_at) and parse_time(requeue_at) > (clock or dt.datetime.now(dt.UTC))


def parse_time(stamp: str) -> dt.datetime:
    return dt.datetime.strptime(stamp[:19], "%Y-%m-%dT%H:%M:%S").replace(tzinfo=dt.UTC)


def _waiting_order(workload: Obj) -> tuple[int, str]:
    """Priority, then the time it was queued (created or requeued); equal ones keep the order
    they were created in (the store keeps it, and the sorts are stable)."""
    requeued = find_condition(workload, "Requeued")
    queued = (requeued or {}).get("lastTransitionTime") or workload["metadata"]["creationTimestamp"]
    return (-int((workload.get("spec") or {}).get("priority") or 0), queued)


def pending_workloads(
    cluster: Cluster,
    cluster_queue: str,
    *,
    version: str,
    local_queue: tuple[str, str] | None = None,
) -> Obj:
    """Kueue's visibility API (PendingWorkloadsSummary): a ClusterQueue's pending workloads
    in admission order, with their 0-based positions in it and in their LocalQueue; for a
    LocalQueue (``local_queue`` = namespace, name) only its own, positions unchanged."""
    waiting = cluster.derive("pending lines", lambda: _pending_lines(cluster)).get(
        cluster_queue, []
    )
    per_lq: dict[tuple[str, str], int] = defaultdict(int)
    items = []
    for position, workload in enumerate(waiting):
        meta = workload["metadata"]
        lq = (meta["namespace"], (workload.get("spec") or {}).get("queueName", ""))
        if local_queue is None or lq == local_queue:
            items.append(
                {
                    "metadata": {
                        "name": meta["name"],
                        "namespace": meta["namespace"],
                        "creationTimestamp": meta["creationTimestamp"],
                        **_owners(meta),
                    },
                    "priority": int((workload.get("spec") or {}).get("priority") or 0),
                    "localQueueName": lq[1],
                    "positionInClusterQueue": position,
                    "positionInLocalQueue": per_lq[lq],
                }
            )
        per_lq[lq] += 1
    return {
        "kind": "PendingWorkloadsSummary",
        "apiVersion": f"visibility.kueue.x-k8s.io/{version}",
        "metadata": {},
        "items": items,
    }


def _pending_lines(cluster: Cluster) -> dict[str, list[Obj]]:
    """Every ClusterQueue's pending workloads in admission order (one pass over the
    workloads, not one per question)."""
    lqs = {
        (q["metadata"]["namespace"], q["metadata"]["name"]): q["spec"].get("clusterQueue", "")
        for q in cluster.all(LQS)
    }
    lines: dict[str, list[Obj]] = defaultdict(list)
    for w in cluster.all(WORKLOADS):
        if is_finished(w) or admitted_to(w):
            continue
        cq = lqs.get((w["metadata"]["namespace"], (w.get("spec") or {}).get("queueName", "")))
        if cq:
            lines[cq].append(w)
    for line in lines.values():
        line.sort(key=_waiting_order)
    return dict(lines)


def _owners(meta: Obj) -> dict[str, Any]:
    owners = [
        {k: o[k] for k in ("apiVersion", "kind", "name", "uid") if k in o}
        for o in meta.get("ownerReferences") or []
    ]
    return {"ownerReferences": owners} if owners else {}


def reconcile(cluster: Cluster, *, fair_sharing: bool = False) -> None:
    """Admit what fits, preempt where the ClusterQueue's policy allows it, explain what
    waits, and write queue status. Runs under the lock."""
    # lazy: the preemption module builds on this one
    from devcluster import preemption

    cqs = {c["metadata"]["name"]: c for c in cluster.all(CQS)}
    lqs = {(q["metadata"]["namespace"], q["metadata"]["name"]): q for q in cluster.all(LQS)}
    flavors = {f["metadata"]["name"]: f for f in cluster.all(FLAVORS)}
    limit_ranges: dict[str, list[Obj]] = defaultdict(list)
    for limit_range in cluster.all(LIMITS):
        limit_ranges[limit_range["metadata"]["namespace"]].append(limit_range)
    for workload in workloads_now(cluster):
        if admitted_to(workload) and (workload.get("spec") or {}).get("active", True) is False:
            deactivate(cluster, workload)
    workloads = workloads_now(cluster)
    usage = usage_of(workloads)
    shares = preemption.weighted_shares(cluster, cqs, usage) if fair_sharing else {}
    pending = sorted(
        (
            w
            for w in workloads
            if not admitted_to(w)
            and (w.get("spec") or {}).get("active", True)
            and not in_backoff(w)
        ),
        key=lambda w: (shares.get(("cq", cluster_queue_of(w, lqs)), 0), _waiting_order(w)),
    )
    pending = _this_cycle(pending, cqs, lqs)
    # What Kueue may preempt this cycle: what it admitted before it (its snapshot), never a
    # workload it admits in the same cycle, which has not run.
    held = {w["metadata"]["uid"] for w in workloads if admitted_to(w)}
    # As Kueue's scheduler, first what fits without borrowing, then the rest in order; a
    # ClusterQueue's workloads in its own order (priority, then time): one that waits for
    # borrowing keeps those behind it in its queue from going first.
    admitted, passed = set(), set()
    dra = Dra(cluster)
    for workload in pending:
        requests = requests_of(workload, limit_ranges[workload["metadata"]["namespace"]], dra)
        if _queue_problem(cluster, workload, cqs, lqs, flavors) is None and not dra_problem(
            workload, dra
        ):
            cq = cqs[cluster_queue_of(workload, lqs)]
            if cq["metadata"]["name"] in passed:
                continue
            assignments, problems = _assign(cq, cqs, usage, workload, requests, flavors, False)
            if not problems:
                _take(usage, cq["metadata"]["name"], assignments)
                _admit(cluster, workload, cq["metadata"]["name"], assignments, requests)
                admitted.add(workload["metadata"]["uid"])
            else:
                passed.add(cq["metadata"]["name"])
    for workload in (w for w in pending if w["metadata"]["uid"] not in admitted):
        requests = requests_of(workload, limit_ranges[workload["metadata"]["namespace"]], dra)
        problem = _queue_problem(cluster, workload, cqs, lqs, flavors)
        if problem is not None:
            _pending(cluster, workload, *problem, requests)
            continue
        unchargeable = dra_problem(workload, dra)
        if unchargeable:
            _pending(cluster, workload, "Inadmissible", unchargeable, requests, requeued=False)
            continue
        cq = cqs[cluster_queue_of(workload, lqs)]
        assignments, problems = _assign(cq, cqs, usage, workload, requests, flavors)
        if problems:
            message = "; ".join(problems)
            victims = preemption.targets(
                cluster,
                workload,
                cq,
                cqs,
                usage,
                requests,
                flavors,
                fair_sharing=fair_sharing,
                held=held,
            )
            if victims:
                preemption.issue(cluster, workload, victims)
                message += f". Pending the preemption of {len(victims)} workload(s)"
            _pending(cluster, workload, "Pending", message, requests)
            continue
        _take(usage, cq["metadata"]["name"], assignments)
        _admit(cluster, workload, cq["metadata"]["name"], assignments, requests)
    _queue_status(cluster, cqs, lqs, set(flavors), usage_of(workloads_now(cluster)))
    _cohort_status(cluster, cqs, usage_of(workloads_now(cluster)), fair_sharing=fair_sharing)


def _this_cycle(
    pending: list[Obj], cqs: dict[str, Obj], lqs: dict[tuple[str, str], Obj]
) -> list[Obj]:
    """What Kueue's scheduler looks at in one cycle: one new head per ClusterQueue, plus the
    workloads it found inadmissible before (BestEffortFIFO sets them aside and tries them
    again when something changes); a StrictFIFO queue only ever looks at its head. So a
    queued workload has no condition until its turn comes, and none at all behind a
    StrictFIFO head that does not fit."""
    out, heads = [], set()
    for workload in pending:
        cq = cluster_queue_of(workload, lqs)
        strict = (cqs.get(cq) or {}).get("spec", {}).get("queueingStrategy") == "StrictFIFO"
        seen = find_condition(workload, "QuotaReserved") is not None
        if cq in heads and (strict or not seen):
            continue
        if strict or not seen:
            heads.add(cq)
        out.append(workload)
    return out


def _take(usage: dict[str, Usage], cq: str, assignments: list[Assignment]) -> None:
    for _, flavor_of, used in assignments:
        for resource, amount in used.items():
            usage[cq][(flavor_of[resource], resource)] += amount


def cluster_queue_of(workload: Obj, lqs: dict[tuple[str, str], Obj]) -> str:
    queue = (workload.get("spec") or {}).get("queueName", "")
    lq = lqs.get((workload["metadata"]["namespace"], queue))
    return str((lq or {}).get("spec", {}).get("clusterQueue", ""))


def workloads_now(cluster: Cluster) -> list[Obj]:
    return [w for w in cluster.all(WORKLOADS) if not is_finished(w)]


def usage_of(workloads: Iterable[Obj]) -> dict[str, Usage]:
    """Quota held per ClusterQueue by the admitted workloads."""
    usage: dict[str, Usage] = defaultdict(lambda: defaultdict(Fraction))
    for workload in workloads:
        cq = admitted_to(workload)
        if cq:
            for assignment in workload["status"]["admission"].get("podSetAssignments") or []:
                for resource, flavor in (assignment.get("flavors") or {}).items():
                    usage[cq][(flavor, resource)] += quantity.parse(
                        (assignment.get("resourceUsage") or {}).get(resource, "0")
                    )
    return usage


DEACTIVATED = "The workload is deactivated"


def deactivate(cluster: Cluster, workload: Obj) -> None:
    """Kueue's workload controller on an admitted Workload set ``spec.active: false``: evicted
    (``Evicted`` ``Deactivated``), its quota released, not requeued; the Workload stays (its
    Job integration then suspends the Job, whose pods go)."""
    status = copy.deepcopy(workload.get("status") or {})
    status.pop("admission", None)
    gen = generation(workload)
    conditions = status.get("conditions") or []
    for kind, state, reason, text in (
        ("Evicted", "True", "Deactivated", DEACTIVATED),
        ("QuotaReserved", "False", "Pending", DEACTIVATED),
        ("Admitted", "False", "NoReservation", "The workload has no reservation"),
        ("Requeued", "False", "Deactivated", DEACTIVATED),
    ):
        conditions = set_condition(conditions, kind, state, reason, text, gen)
    status["conditions"] = conditions
    stats = status.setdefault("schedulingStats", {})
    evictions: list[dict[str, Any]] = stats.setdefault("evictions", [])
    entry = next((e for e in evictions if e.get("reason") == "Deactivated"), None)
    if entry is None:
        evictions.append({"count": 1, "reason": "Deactivated", "underlyingCause": ""})
    else:
        entry["count"] += 1
    stored = cluster._store(WORKLOADS, {**copy.deepcopy(workload), "status": status}, workload)  # type: ignore[arg-type]
    event(cluster, stored, "Normal", "EvictedDueToDeactivated", DEACTIVATED)


def _queue_problem(
    cluster: Cluster,
    workload: Obj,
    cqs: dict[str, Obj],
    lqs: dict[tuple[str, str], Obj],
    flavors: dict[str, Obj],
) -> tuple[str, str] | None:
    """(reason, message) when the workload's queues cannot admit anything."""
    namespace = workload["metadata"]["namespace"]
    queue_name = (workload.get("spec") or {}).get("queueName", "")
    lq = lqs.get((namespace, queue_name))
    if lq is None:
        return "Inadmissible", f"LocalQueue {queue_name} doesn't exist"
    cq_name = lq["spec"].get("clusterQueue", "")
    cq = cqs.get(cq_name)
    if cq is None:
        return "Inadmissible", f"ClusterQueue {cq_name} doesn't exist"
    if lq["spec"].get("stopPolicy", "None") != "None":
        return "Inadmissible", f"LocalQueue {queue_name} is inactive"
    if cq["spec"].get("stopPolicy", "None") != "None" or _missing_flavors(cq, set(flavors)):
        return "Inadmissible", f"ClusterQueue {cq_name} is inactive"
    ns = cluster.get(NAMESPACES, "", namespace) or {"metadata": {}}  # type: ignore[arg-type]
    if not selector_matches(cq["spec"].get("namespaceSelector"), ns["metadata"].get("labels", {})):
        return "Pending", "workload namespace doesn't match ClusterQueue selector"
    return None


def _missing_flavors(cq: Obj, flavors: set[str]) -> list[str]:
    return [
        f["name"]
        for g in cq["spec"].get("resourceGroups") or []
        for f in g.get("flavors") or []
        if f["name"] not in flavors
    ]


def _quota(cq: Obj) -> dict[tuple[str, str], dict[str, Fraction | None]]:
    out = {}
    for group in cq["spec"].get("resourceGroups") or []:
        for flavor in group.get("flavors") or []:
            for res in flavor.get("resources") or []:
                out[(flavor["name"], res["name"])] = {
                    "nominal": quantity.parse(res.get("nominalQuota", 0)),
                    "borrowing": quantity.parse(res["borrowingLimit"])
                    if res.get("borrowingLimit") is not None
                    else None,
                    "lending": quantity.parse(res["lendingLimit"])
                    if res.get("lendingLimit") is not None
                    else None,
                }
    return out


def _ceiling(
    cq_name: str, cqs: dict[str, Obj], usage: dict[str, Usage], key: tuple[str, str]
) -> Fraction:
    """The most a ClusterQueue may hold of (flavor, resource): what it holds, what is left of
    its guaranteed part (nominal minus what it lends) and what is left of the cohort's pool
    of lendable quota (every member's ``lendingLimit``, or its nominal quota)."""
    cohort = cqs[cq_name]["spec"].get("cohortName")
    pool = pool_used = guaranteed_here = Fraction(0)
    for name, cq in cqs.items():
        if name != cq_name and not (cohort and cq["spec"].get("cohortName") == cohort):
            continue
        quota = _quota(cq).get(key)
        if quota is None:
            continue
        nominal = quota["nominal"] or Fraction(0)
        lendable = quota["lending"] if quota["lending"] is not None else nominal
        pool += lendable
        pool_used += max(Fraction(0), usage[name][key] - (nominal - lendable))
        if name == cq_name:
            guaranteed_here = nominal - lendable
    used = usage[cq_name][key]
    return used + max(Fraction(0), guaranteed_here - used) + max(Fraction(0), pool - pool_used)


def _limits(
    cq_name: str,
    cqs: dict[str, Obj],
    usage: dict[str, Usage],
    key: tuple[str, str],
    borrowing: bool = True,
) -> tuple[Fraction, Fraction, Fraction]:
    """(used, ceiling now, ceiling when the cohort is idle) of a ClusterQueue's quota."""
    limits = _quota(cqs[cq_name])[key]
    nominal = limits["nominal"] or Fraction(0)
    used = usage[cq_name][key]
    now, most = _ceiling(cq_name, cqs, usage, key), _ceiling(cq_name, cqs, _EMPTY, key)
    if not borrowing:  # within nominal quota, less what others borrow of it
        return used, min(nominal, now), nominal
    if limits["borrowing"] is not None:
        cap = nominal + limits["borrowing"]
        now, most = min(now, cap), min(most, cap)
    return used, now, most


def _shortage(
    cq_name: str,
    cqs: dict[str, Obj],
    usage: dict[str, Usage],
    flavor: str,
    resource: str,
    amount: Fraction,
    borrowing: bool = True,
) -> str | None:
    used, ceiling, maximum = _limits(cq_name, cqs, usage, (flavor, resource), borrowing)
    if amount > maximum:
        return (
            f"insufficient quota for {resource} in flavor {flavor}, previously considered "
            f"podsets requests (0) + current podset request ({fmt(resource, amount)}) > "
            f"maximum capacity ({fmt(resource, maximum)})"
        )
    if used + amount > ceiling:
        return (
            f"insufficient unused quota for {resource} in flavor {flavor}, "
            f"{fmt(resource, used + amount - ceiling)} more needed"
        )
    return None


def _flavor_mismatch(flavor: Obj | None, name: str, pod_spec: Obj) -> str | None:
    """Why a flavor's nodes cannot take the pod set (its node selector or their taints)."""
    spec = (flavor or {}).get("spec") or {}
    labels = spec.get("nodeLabels") or {}
    for key, value in (pod_spec.get("nodeSelector") or {}).items():
        if key in labels and labels[key] != value:
            return f"flavor {name} doesn't match node affinity"
    tolerations = [*(pod_spec.get("tolerations") or []), *(spec.get("tolerations") or [])]
    for taint in spec.get("nodeTaints") or []:
        if taint.get("effect") == "PreferNoSchedule":
            continue
        if not any(tolerates_taint(t, taint) for t in tolerations):
            value = f"={taint['value']}" if taint.get("value") else ""
            return f"untolerated taint {taint['key']}{value}:{taint['effect']} in flavor {name}"
    return None


def _assign(
    cq: Obj,
    cqs: dict[str, Obj],
    usage: dict[str, Usage],
    workload: Obj,
    requests: list[tuple[str, int, dict[str, Fraction]]],
    flavors: dict[str, Obj],
    borrowing: bool = True,
) -> tuple[list[Assignment], list[str]]:
    """Flavors per pod set: every resource group takes the first flavor where all of its
    requested resources fit (Kueue's order), else the reason, as Kueue words it. As Kueue,
    the resources are taken one by one (a requested zero too: it gets its group's flavor)
    and the first one that cannot be assigned ends the search: the message names that one
    alone (Kueue goes through a Go map, in no fixed order; here by name)."""
    cq_name = cq["metadata"]["name"]
    groups = cq["spec"].get("resourceGroups") or []
    templates = {
        p.get("name", "main"): p.get("template") or {}
        for p in workload["spec"].get("podSets") or []
    }
    assignments, problems = [], []
    for pod_set, _count, wanted in requests:
        pod_spec = templates.get(pod_set, {}).get("spec") or {}
        flavor_of: dict[str, str] = {}
        reasons: list[str] = []
        for resource in sorted(wanted):
            if resource in flavor_of:
                continue
            group = next((g for g in groups if resource in g.get("coveredResources", [])), None)
            if group is None:
                reasons = [f"resource {resource} unavailable in ClusterQueue"]
                break
            needed = [r for r in group.get("coveredResources", []) if r in wanted]
            found, reasons = _group_flavor(
                cq_name, cqs, usage, group, needed, wanted, flavors, pod_spec, borrowing
            )
            if found is None:
                break
            flavor_of.update({r: found for r in needed})
        if reasons:
            problems.append(f"couldn't assign flavors to pod set {pod_set}: {', '.join(reasons)}")
        else:
            assignments.append((pod_set, flavor_of, dict(wanted)))
    return assignments, problems


def _group_flavor(
    cq_name: str,
    cqs: dict[str, Obj],
    usage: dict[str, Usage],
    group: Obj,
    needed: list[str],
    wanted: dict[str, Fraction],
    flavors: dict[str, Obj],
    pod_spec: Obj,
    borrowing: bool,
) -> tuple[str | None, list[str]]:
    """The first flavor of a resource group where all of ``needed`` fit, or None and why
    each flavor does not."""
    reasons: list[str] = []
    for flavor in group.get("flavors") or []:
        mismatch = _flavor_mismatch(flavors.get(flavor["name"]), flavor["name"], pod_spec)
        short = (
            [mismatch]
            if mismatch
            else [
                s
                for r in needed
                if (s := _shortage(cq_name, cqs, usage, flavor["name"], r, wanted[r], borrowing))
            ]
        )
        if not short:
            return flavor["name"], []
        reasons.extend(short)
    return None, reasons


def _resource_requests(requests: list[tuple[str, int, dict[str, Fraction]]]) -> list[Obj]:
    return [
        {"name": name, "resources": {r: fmt(r, a) for r, a in sorted(totals.items())}}
        for name, _, totals in requests
    ]


def _pending(
    cluster: Cluster,
    workload: Obj,
    reason: str,
    message: str,
    requests: list[tuple[str, int, dict[str, Fraction]]],
    *,
    requeued: bool = True,
) -> None:
    """QuotaReserved=False with Kueue's reason and message (a ``Pending`` Warning event
    when the message changes); ``Admitted`` only turns False if the workload had it. Not
    ``requeued``: Kueue's workload controller holds it out of line (claims it cannot charge:
    ``Requeued=False`` with the same words, and no ``resourceRequests``)."""
    status = copy.deepcopy(workload.get("status") or {})
    conditions = status.get("conditions") or []
    before = find_condition(workload, "QuotaReserved")
    gen = generation(workload)
    conditions = set_condition(conditions, "QuotaReserved", "False", reason, message, gen)
    if not requeued:
        conditions = set_condition(conditions, "Requeued", "False", reason, message, gen)
    if any(c["type"] == "Admitted" for c in conditions):
        conditions = set_condition(
            conditions, "Admitted", "False", "NoReservation", "The workload has no reservation", gen
        )
    status["conditions"] = conditions
    if requeued:
        status["resourceRequests"] = _resource_requests(requests)
    else:
        status.pop("resourceRequests", None)
    if status != workload.get("status"):
        stored = cluster._store(WORKLOADS, {**copy.deepcopy(workload), "status": status}, workload)
        if before is None or before.get("message") != message or before.get("status") != "False":
            event(cluster, stored, "Warning", "Pending", message)


def _admit(
    cluster: Cluster,
    workload: Obj,
    cq: str,
    assignments: list[Assignment],
    requests: list[tuple[str, int, dict[str, Fraction]]],
) -> None:
    status = copy.deepcopy(workload.get("status") or {})
    counts = {name: count for name, count, _ in requests}
    status["admission"] = {
        "clusterQueue": cq,
        "podSetAssignments": [
            {
                "count": counts.get(name, 1),
                "flavors": flavor_of,
                "name": name,
                "resourceUsage": {k: fmt(k, v) for k, v in used.items()},
            }
            for name, flavor_of, used in assignments
        ],
    }
    status.pop("resourceRequests", None)
    gen = generation(workload)
    conditions = status.get("conditions") or []
    for kind in ("Evicted", "Preempted"):
        old = next((c for c in conditions if c["type"] == kind and c["status"] == "True"), None)
        if old is not None:
            conditions = set_condition(
                conditions, kind, "False", "QuotaReserved", f"Previously: {old['message']}", gen
            )
    conditions = set_condition(
        conditions,
        "QuotaReserved",
        "True",
        "QuotaReserved",
        f"Quota reserved in ClusterQueue {cq}",
        gen,
    )
    conditions = set_condition(
        conditions, "Admitted", "True", "Admitted", "The workload is admitted", gen
    )
    status["conditions"] = conditions
    stored = cluster._store(WORKLOADS, {**copy.deepcopy(workload), "status": status}, workload)
    queued = parse_time(_waiting_order(workload)[1])
    waited = max(0.0, (dt.datetime.now(dt.UTC) - queued).total_seconds())
    event(
        cluster,
        stored,
        "Normal",
        "QuotaReserved",
        f"Quota reserved in ClusterQueue {cq}, wait time since queued was {waited:.0f}s",
    )
    event(
        cluster,
        stored,
        "Normal",
        "Admitted",
        f"Admitted by ClusterQueue {cq}, wait time since reservation was 0s",
    )


def _flavors_status(
    quota: dict[tuple[str, str], dict[str, Fraction | None]], used: Usage, *, borrowed: bool
) -> list[Obj]:
    by_flavor: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for (flavor, resource), limits in quota.items():
        total = used[(flavor, resource)]
        entry: dict[str, Any] = {"name": resource, "total": fmt(resource, total)}
        if borrowed:
            over = max(Fraction(0), total - (limits["nominal"] or Fraction(0)))
            entry["borrowed"] = fmt(resource, over)
        by_flavor[flavor].append(entry)
    return [{"name": f, "resources": r} for f, r in by_flavor.items()]


def _queue_status(
    cluster: Cluster,
    cqs: dict[str, Obj],
    lqs: dict[tuple[str, str], Obj],
    flavors: set[str],
    usage: dict[str, Usage],
) -> None:
    counts: dict[str, dict[str, int]] = defaultdict(lambda: {"pending": 0, "admitted": 0})
    lq_counts: dict[tuple[str, str], dict[str, int]] = defaultdict(
        lambda: {"pending": 0, "admitted": 0}
    )
    lq_usage: dict[tuple[str, str], Usage] = defaultdict(lambda: defaultdict(Fraction))
    for workload in workloads_now(cluster):
        key = (workload["metadata"]["namespace"], (workload.get("spec") or {}).get("queueName", ""))
        cq = admitted_to(workload)
        bucket = "admitted" if cq else "pending"
        lq_counts[key][bucket] += 1
        if key in lqs:
            counts[lqs[key]["spec"].get("clusterQueue", "")][bucket] += 1
        for (flavor, resource), amount in usage_of([workload]).get(cq, {}).items():
            lq_usage[key][(flavor, resource)] += amount
    for name, cq in cqs.items():
        missing = _missing_flavors(cq, flavors)
        active = _condition(
            "Active",
            "False" if missing else "True",
            "FlavorNotFound" if missing else "Ready",
            f"Can't admit new workloads: references missing ResourceFlavor(s): {missing}."
            if missing
            else "Can admit new workloads",
            (cq.get("status") or {}).get("conditions") or [],
            generation(cq),
        )
        flavors_usage = _flavors_status(_quota(cq), usage[name], borrowed=True)
        status = {
            **{k: v for k, v in (cq.get("status") or {}).items() if k == "fairSharing"},
            "pendingWorkloads": counts[name]["pending"],
            "reservingWorkloads": counts[name]["admitted"],
            "admittedWorkloads": counts[name]["admitted"],
            "flavorsReservation": flavors_usage,
            "flavorsUsage": copy.deepcopy(flavors_usage),
            "conditions": [active],
        }
        if cq.get("status") != status:
            cluster._store(CQS, {**copy.deepcopy(cq), "status": status}, cq)
    for key, lq in lqs.items():
        _local_queue_status(cluster, lq, cqs, lq_counts[key], lq_usage[key])


def _local_queue_status(
    cluster: Cluster, lq: Obj, cqs: dict[str, Obj], counts: dict[str, int], used: Usage
) -> None:
    cq = cqs.get(lq["spec"].get("clusterQueue", ""))
    active = _condition(
        "Active",
        "True" if cq is not None else "False",
        "Ready" if cq is not None else "ClusterQueueDoesNotExist",
        "Can submit new workloads to localQueue"
        if cq is not None
        else "Can't submit new workloads to clusterQueue",
        (lq.get("status") or {}).get("conditions") or [],
        generation(lq),
    )
    # The ClusterQueue's flavors and resources, each with what this queue's workloads hold.
    quota = {k: v for k, v in _quota(cq).items() if any(k[0] == f for f, _ in used)} if cq else {}
    usage_list = _flavors_status(quota, used, borrowed=False)
    status = {
        "pendingWorkloads": counts["pending"],
        "reservingWorkloads": counts["admitted"],
        "admittedWorkloads": counts["admitted"],
        "flavorsReservation": usage_list,
        "flavorsUsage": copy.deepcopy(usage_list),
        "conditions": [active],
    }
    if lq.get("status") != status:
        cluster._store(LQS, {**copy.deepcopy(lq), "status": status}, lq)


def _cohort_status(
    cluster: Cluster, cqs: dict[str, Obj], usage: dict[str, Usage], *, fair_sharing: bool
) -> None:
    """A Cohort's status: empty, as Kueue leaves it, unless fair sharing is on."""
    # lazy: the preemption module builds on this one
    from devcluster import preemption

    shares = preemption.weighted_shares(cluster, cqs, usage) if fair_sharing else {}
    for cohort in cluster.all(COHORTS):
        name = cohort["metadata"]["name"]
        status: Obj = {}
        if fair_sharing:
            status["fairSharing"] = {"weightedShare": shares.get(("cohort", name), 0)}
        if cohort.get("status") != status:
            cluster._store(COHORTS, {**copy.deepcopy(cohort), "status": status}, cohort)
    for name, cq in cqs.items():
        if not fair_sharing:
            continue
        fair = {"weightedShare": shares.get(("cq", name), 0)}
        if (cq.get("status") or {}).get("fairSharing") != fair:
            status = {**(cq.get("status") or {}), "fairSharing": fair}
            cluster._store(CQS, {**copy.deepcopy(cq), "status": status}, cq)
