"""Kueue-style admission for the demo cluster: Workloads get quota from ClusterQueues.

A small, deterministic version of Kueue's scheduler: workloads are taken by priority, then
age; each pod set's resources are assigned the first flavor (in the ClusterQueue's order)
with enough unused quota, borrowing from the cohort up to ``borrowingLimit``. Messages are
Kueue's own (see ``reference`` and kueue-semantics), with the default feature gates:
``QuotaReserved=False`` has reason ``Pending`` (or ``Inadmissible`` for missing queues).
"""

from __future__ import annotations

import copy
from collections import defaultdict
from fractions import Fraction
from typing import Any

from devcluster import quantity
from devcluster.cluster import Cluster, Obj, now
from devcluster.resources import find
from devcluster.selectors import selector_matches

WORKLOADS = find("kueue.x-k8s.io", "v1beta2", "workloads")
CQS = find("kueue.x-k8s.io", "v1beta2", "clusterqueues")
LQS = find("kueue.x-k8s.io", "v1beta2", "localqueues")
FLAVORS = find("kueue.x-k8s.io", "v1beta2", "resourceflavors")
NAMESPACES = find("", "v1", "namespaces")

Usage = dict[tuple[str, str], Fraction]  # (flavor, resource) -> amount
_EMPTY: dict[str, Usage] = defaultdict(lambda: defaultdict(Fraction))


def _condition(
    kind: str, status: str, reason: str, message: str, previous: list[dict[str, Any]]
) -> dict[str, Any]:
    old = next((c for c in previous if c.get("type") == kind), None)
    stamp = old["lastTransitionTime"] if old and old.get("status") == status else now()
    return {
        "type": kind,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": stamp,
        "observedGeneration": 1,
    }


def requests_of(workload: Obj) -> list[tuple[str, int, dict[str, Fraction]]]:
    """(pod set name, count, total requests) per pod set."""
    out = []
    for pod_set in (workload.get("spec") or {}).get("podSets") or []:
        count = int(pod_set.get("count", 1))
        per_pod: dict[str, Fraction] = defaultdict(Fraction)
        spec = (pod_set.get("template") or {}).get("spec") or {}
        for container in spec.get("containers") or []:
            resources = container.get("resources") or {}
            for name, value in (resources.get("requests") or resources.get("limits") or {}).items():
                per_pod[name] += quantity.parse(value)
        out.append((pod_set.get("name", "main"), count, {k: v * count for k, v in per_pod.items()}))
    return out


def is_finished(workload: Obj) -> bool:
    return any(
        c.get("type") == "Finished" and c.get("status") == "True"
        for c in (workload.get("status") or {}).get("conditions") or []
    )


def admitted_to(workload: Obj) -> str:
    admission = (workload.get("status") or {}).get("admission") or {}
    return str(admission.get("clusterQueue") or "")


def _waiting_order(workload: Obj) -> tuple[int, str, str]:
    return (
        -int((workload.get("spec") or {}).get("priority") or 0),
        workload["metadata"]["creationTimestamp"],
        workload["metadata"]["name"],
    )


def pending_workloads(cluster: Cluster, cluster_queue: str, *, version: str) -> Obj:
    """Kueue's visibility API (PendingWorkloadsSummary): a ClusterQueue's pending workloads
    in admission order, with their 0-based positions in it and in their LocalQueue."""
    lqs = {
        (q["metadata"]["namespace"], q["metadata"]["name"]): q["spec"].get("clusterQueue", "")
        for q in cluster.all(LQS)
    }
    waiting = sorted(
        (
            w
            for w in cluster.all(WORKLOADS)
            if not is_finished(w)
            and not admitted_to(w)
            and lqs.get((w["metadata"]["namespace"], (w.get("spec") or {}).get("queueName", "")))
            == cluster_queue
        ),
        key=_waiting_order,
    )
    per_lq: dict[tuple[str, str], int] = defaultdict(int)
    items = []
    for position, workload in enumerate(waiting):
        meta = workload["metadata"]
        lq = (meta["namespace"], (workload.get("spec") or {}).get("queueName", ""))
        items.append(
            {
                "metadata": {
                    "name": meta["name"],
                    "namespace": meta["namespace"],
                    "creationTimestamp": meta["creationTimestamp"],
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
        "metadata": {"creationTimestamp": None},
        "items": items,
    }


def reconcile(cluster: Cluster) -> None:
    """Admit what fits, explain what waits, and write queue status. Runs under the lock."""
    cqs = {c["metadata"]["name"]: c for c in cluster.all(CQS)}
    lqs = {(q["metadata"]["namespace"], q["metadata"]["name"]): q for q in cluster.all(LQS)}
    flavors = {f["metadata"]["name"] for f in cluster.all(FLAVORS)}
    namespaces = {n["metadata"]["name"]: n for n in cluster.all(NAMESPACES)}
    workloads = [w for w in cluster.all(WORKLOADS) if not is_finished(w)]
    usage: dict[str, Usage] = defaultdict(lambda: defaultdict(Fraction))
    for workload in workloads:
        cq = admitted_to(workload)
        if cq:
            for assignment in workload["status"]["admission"].get("podSetAssignments") or []:
                for resource, flavor in (assignment.get("flavors") or {}).items():
                    usage[cq][(flavor, resource)] += quantity.parse(
                        (assignment.get("resourceUsage") or {}).get(resource, "0")
                    )
    pending = sorted((w for w in workloads if not admitted_to(w)), key=_waiting_order)
    for workload in pending:
        namespace = workload["metadata"]["namespace"]
        queue_name = (workload.get("spec") or {}).get("queueName", "")
        lq = lqs.get((namespace, queue_name))
        if lq is None:
            _pending(cluster, workload, "Inadmissible", f"LocalQueue {queue_name} doesn't exist")
            continue
        cq_name = lq["spec"].get("clusterQueue", "")
        cq = cqs.get(cq_name)
        if cq is None:
            _pending(cluster, workload, "Inadmissible", f"ClusterQueue {cq_name} doesn't exist")
            continue
        if (
            cq["spec"].get("stopPolicy", "None") != "None"
            or lq["spec"].get("stopPolicy", "None") != "None"
        ):
            _pending(cluster, workload, "Inadmissible", f"ClusterQueue {cq_name} is inactive")
            continue
        labels = (namespaces.get(namespace) or {}).get("metadata", {}).get("labels", {})
        if not selector_matches(cq["spec"].get("namespaceSelector"), labels):
            _pending(
                cluster,
                workload,
                "Pending",
                "workload namespace doesn't match ClusterQueue selector",
            )
            continue
        missing = _missing_flavors(cq, flavors)
        if missing:
            _pending(cluster, workload, "Inadmissible", f"ClusterQueue {cq_name} is inactive")
            continue
        assignments, problems = _assign(cq, cqs, usage, workload)
        if problems:
            _pending(cluster, workload, "Pending", "; ".join(problems))
            continue
        for _, flavor_of, used in assignments:
            for resource, amount in used.items():
                usage[cq_name][(flavor_of[resource], resource)] += amount
        _admit(cluster, workload, cq_name, assignments)
    _queue_status(cluster, cqs, lqs, flavors, usage)


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


def _cohort_free(
    cq_name: str, cqs: dict[str, Obj], usage: dict[str, Usage], key: tuple[str, str]
) -> Fraction:
    """What the other members of the cohort lend and do not use for (flavor, resource)."""
    cohort = cqs[cq_name]["spec"].get("cohortName")
    if not cohort:
        return Fraction(0)
    free = Fraction(0)
    for name, other in cqs.items():
        if name == cq_name or other["spec"].get("cohortName") != cohort:
            continue
        quota = _quota(other).get(key)
        if quota is None:
            continue
        lendable = quota["lending"] if quota["lending"] is not None else quota["nominal"]
        used_above_guarantee = max(Fraction(0), usage[name][key] - (quota["nominal"] - lendable))
        free += max(Fraction(0), lendable - used_above_guarantee)
    return free


def _assign(
    cq: Obj, cqs: dict[str, Obj], usage: dict[str, Usage], workload: Obj
) -> tuple[list[tuple[str, dict[str, str], dict[str, Fraction]]], list[str]]:
    cq_name = cq["metadata"]["name"]
    quota = _quota(cq)
    groups = cq["spec"].get("resourceGroups") or []
    assignments, problems = [], []
    for pod_set, _count, requests in requests_of(workload):
        flavor_of: dict[str, str] = {}
        reasons: list[str] = []
        for resource, amount in sorted(requests.items()):
            if not amount:
                continue
            group = next((g for g in groups if resource in g.get("coveredResources", [])), None)
            if group is None:
                reasons.append(f"resource {resource} unavailable in ClusterQueue")
                continue
            chosen = None
            flavor_reasons = []
            for flavor in group.get("flavors") or []:
                key = (flavor["name"], resource)
                limits = quota[key]
                used = usage[cq_name][key]
                borrow_cap = limits["borrowing"]
                free_now = _cohort_free(cq_name, cqs, usage, key)
                free_max = _cohort_free(cq_name, cqs, _EMPTY, key)
                if borrow_cap is not None:
                    free_now, free_max = min(borrow_cap, free_now), min(borrow_cap, free_max)
                ceiling = limits["nominal"] + free_now
                maximum = limits["nominal"] + free_max
                if amount > maximum:
                    flavor_reasons.append(
                        f"insufficient quota for {resource} in flavor {flavor['name']}, previously "
                        f"considered podsets requests (0) + current podset request "
                        f"({quantity.fmt(amount)}) > maximum capacity ({quantity.fmt(maximum)})"
                    )
                elif used + amount > ceiling:
                    flavor_reasons.append(
                        f"insufficient unused quota for {resource} in flavor {flavor['name']}, "
                        f"{quantity.fmt(used + amount - ceiling)} more needed"
                    )
                else:
                    chosen = flavor["name"]
                    break
            if chosen is None:
                reasons.extend(flavor_reasons)
            else:
                flavor_of[resource] = chosen
        if reasons:
            problems.append(
                f"couldn't assign flavors to pod set {pod_set}: {', '.join(sorted(reasons))}"
            )
        else:
            assignments.append((pod_set, flavor_of, requests))
    return assignments, problems


def _pending(cluster: Cluster, workload: Obj, reason: str, message: str) -> None:
    status = copy.deepcopy(workload.get("status") or {})
    previous = status.get("conditions") or []
    conditions = [c for c in previous if c.get("type") not in ("QuotaReserved", "Admitted")]
    conditions.append(_condition("QuotaReserved", "False", reason, message, previous))
    conditions.append(
        _condition(
            "Admitted", "False", "NoReservation", "The workload has no reservation", previous
        )
    )
    status["conditions"] = conditions
    if status != workload.get("status"):
        new = {**workload, "status": status}
        cluster._store(WORKLOADS, copy.deepcopy(new), workload)


def _admit(
    cluster: Cluster,
    workload: Obj,
    cq: str,
    assignments: list[tuple[str, dict[str, str], dict[str, Fraction]]],
) -> None:
    status = copy.deepcopy(workload.get("status") or {})
    previous = status.get("conditions") or []
    status["admission"] = {
        "clusterQueue": cq,
        "podSetAssignments": [
            {
                "name": name,
                "flavors": flavor_of,
                "resourceUsage": {k: quantity.fmt(v) for k, v in used.items()},
                "count": count,
            }
            for (name, flavor_of, used), (_, count, _) in zip(
                assignments, requests_of(workload), strict=False
            )
        ],
    }
    status["conditions"] = [
        c for c in previous if c.get("type") not in ("QuotaReserved", "Admitted")
    ] + [
        _condition(
            "QuotaReserved",
            "True",
            "QuotaReserved",
            f"Quota reserved in ClusterQueue {cq}",
            previous,
        ),
        _condition("Admitted", "True", "Admitted", "The workload is admitted", previous),
    ]
    cluster._store(WORKLOADS, {**copy.deepcopy(workload), "status": status}, workload)


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
    for workload in cluster.all(WORKLOADS):
        if is_finished(workload):
            continue
        key = (workload["metadata"]["namespace"], (workload.get("spec") or {}).get("queueName", ""))
        cq = admitted_to(workload)
        bucket = "admitted" if cq else "pending"
        lq_counts[key][bucket] += 1
        if key in lqs:
            counts[lqs[key]["spec"].get("clusterQueue", "")][bucket] += 1
        if cq:
            for assignment in workload["status"]["admission"].get("podSetAssignments") or []:
                for resource, flavor in (assignment.get("flavors") or {}).items():
                    lq_usage[key][(flavor, resource)] += quantity.parse(
                        (assignment.get("resourceUsage") or {}).get(resource, "0")
                    )
    for name, cq in cqs.items():
        quota = _quota(cq)
        used = usage[name]
        by_flavor: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for (flavor, resource), limits in quota.items():
            total = used[(flavor, resource)]
            by_flavor[flavor].append(
                {
                    "name": resource,
                    "total": quantity.fmt(total),
                    "borrowed": quantity.fmt(max(Fraction(0), total - limits["nominal"])),
                }
            )
        missing = _missing_flavors(cq, flavors)
        active = _condition(
            "Active",
            "False" if missing else "True",
            "FlavorNotFound" if missing else "Ready",
            f"Can't admit new workloads: references missing ResourceFlavor(s): {missing}."
            if missing
            else "Can admit new workloads",
            (cq.get("status") or {}).get("conditions") or [],
        )
        flavors_usage = [{"name": f, "resources": r} for f, r in by_flavor.items()]
        status = {
            "pendingWorkloads": counts[name]["pending"],
            "reservingWorkloads": counts[name]["admitted"],
            "admittedWorkloads": counts[name]["admitted"],
            "flavorsReservation": flavors_usage,
            "flavorsUsage": flavors_usage,
            "conditions": [active],
        }
        if cq.get("status") != status:
            cluster._store(CQS, {**copy.deepcopy(cq), "status": status}, cq)
    for key, lq in lqs.items():
        cq_exists = lq["spec"].get("clusterQueue") in cqs
        by_flavor = defaultdict(list)
        for (flavor, resource), total in lq_usage[key].items():
            by_flavor[flavor].append({"name": resource, "total": quantity.fmt(total)})
        active = _condition(
            "Active",
            "True" if cq_exists else "False",
            "Ready" if cq_exists else "ClusterQueueDoesNotExist",
            "Can submit new workloads to localQueue"
            if cq_exists
            else "Can't submit new workloads to clusterQueue",
            (lq.get("status") or {}).get("conditions") or [],
        )
        usage_list = [{"name": f, "resources": r} for f, r in by_flavor.items()]
        status = {
            "pendingWorkloads": lq_counts[key]["pending"],
            "reservingWorkloads": lq_counts[key]["admitted"],
            "admittedWorkloads": lq_counts[key]["admitted"],
            "flavorsReservation": usage_list,
            "flavorsUsage": usage_list,
            "conditions": [active],
        }
        if lq.get("status") != status:
            cluster._store(LQS, {**copy.deepcopy(lq), "status": status}, lq)
