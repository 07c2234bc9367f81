"""Kueue Workloads as the last poll saw them, for the Workloads list and one workload's page
(and their API): which workloads a user may see, each one's state, and its story told from
Kueue's conditions.

A user sees the workloads of their teams' namespaces (every namespace for approvers and
platform admins), on the clusters they may see; another team's workload is no workload to
them (its page is a 404, as the API's detail), so no other team's name ever reaches a lead.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import yaml
from django.db.models import (
    Case,
    CharField,
    Exists,
    F,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    Value,
    When,
)

from cluster.models import ObservedPod, ObservedWorkload
from portal.access.permissions import sees_every_team, user_id
from portal.vocabulary.words import code_words
from queues.models import LocalQueue
from queues.observed import waiting_cluster_queue
from tenants.models import Namespace

# A workload's state, each the condition on its row: the one rule of the list's filter, its
# tags, the page's heading and the API's ``state``.
STATE_WHERE: Mapping[str, Q] = {
    "finished": Q(finished=True),
    "admitted": Q(finished=False, admitted=True),
    "evicted": Q(finished=False, admitted=False, evicted_at__isnull=False),
    "waiting": Q(finished=False, admitted=False, evicted_at__isnull=True),
}
STATES = (
    ("waiting", "Waiting"),
    ("admitted", "Admitted"),
    ("evicted", "Evicted"),
    ("finished", "Finished"),
)
STATE_MEANS = {
    "waiting": "waits in line for quota",
    "admitted": "is admitted: Kueue reserved its quota and its pods may run",
    "evicted": "was evicted by Kueue and is not admitted again yet",
    "finished": "has finished",
}
STATE = Case(
    *(When(where, then=Value(state)) for state, where in STATE_WHERE.items()),
    output_field=CharField(),
)
# The columns the list shows (the conditions, the explanation and the message stay behind).
LISTED = (
    "cluster_id",
    "namespace",
    "name",
    "queue_name",
    "cluster_queue",
    "admitted",
    "finished",
    "requests",
    "flavors",
    "priority",
    "created_at",
    "admitted_at",
    "finished_at",
    "queued_at",
    "evictions",
    "evicted_reason",
    "evicted_at",
    "requeue_at",
    "position",
    "position_in_local_queue",
)


def team_of_namespace() -> Subquery:
    """The slug of the team whose namespace the workload is in (on its cluster), or None."""
    return Subquery(
        Namespace.objects.filter(cluster_id=OuterRef("cluster_id"), name=OuterRef("namespace"))
        .order_by()
        .values("team__slug")[:1]
    )


def visible_workloads(user: Any, cluster_ids: Sequence[int] | QuerySet[Any]) -> QuerySet[Any]:
    """The workloads ``user`` may see on these clusters (ids, or a query of them), each with
    its ``state``: every one for approvers and platform admins, their teams' namespaces' for
    anyone else. One statement, whatever the number of workloads."""
    rows = ObservedWorkload.objects.on_every_cluster().filter(cluster_id__in=cluster_ids)
    if not sees_every_team(user):
        mine = Namespace.objects.filter(
            cluster_id=OuterRef("cluster_id"),
            name=OuterRef("namespace"),
            team__memberships__user_id=user_id(user),
        )
        rows = rows.filter(Exists(mine))
    return rows.annotate(state=STATE)


def named(rows: QuerySet[Any]) -> QuerySet[Any]:
    """``rows`` each with ``team`` (its namespace's team's slug) and ``queue`` (the
    ClusterQueue it is in, its LocalQueue's while it waits): two subqueries a row, for the
    rows shown only (``page_of``)."""
    return rows.annotate(team=team_of_namespace(), queue=waiting_cluster_queue(Value("")))


def page_of(sliced: QuerySet[Any]) -> QuerySet[Any]:
    """The rows of a page of the list (a slice of it), named (``named``) and in its order:
    a page deep in 50,000 workloads computes the names of its 50, not of every row before."""
    page = ObservedWorkload.objects.on_every_cluster().filter(pk__in=sliced.values("pk"))
    rows = named(page.annotate(state=STATE)).only(*LISTED)
    order = sliced.query.order_by
    return rows.order_by(*order) if order else newest_first(rows)


def newest_first(rows: QuerySet[Any]) -> QuerySet[Any]:
    """The list's order: the newest first, along the index ``observed_workload_newest``."""
    return rows.order_by(F("created_at").desc(nulls_last=True), F("id").desc())


def in_team(rows: QuerySet[Any], slug: str) -> QuerySet[Any]:
    """The workloads of the namespaces of team ``slug`` (on their own cluster)."""
    return rows.filter(
        Exists(
            Namespace.objects.filter(
                cluster_id=OuterRef("cluster_id"), name=OuterRef("namespace"), team__slug=slug
            )
        )
    )


def in_cluster_queue(rows: QuerySet[Any], name: str) -> QuerySet[Any]:
    """The workloads in ClusterQueue ``name``: holding its quota, or waiting in a LocalQueue
    that points at it (the rule of ``queues.observed.waiting_cluster_queue``, as a filter)."""
    via_local_queue = LocalQueue.objects.filter(
        namespace__cluster_id=OuterRef("cluster_id"),
        namespace__name=OuterRef("namespace"),
        name=OuterRef("queue_name"),
        cluster_queue__name=name,
    )
    return rows.filter(Q(cluster_queue=name) | Q(cluster_queue="") & Exists(via_local_queue))


def search(rows: QuerySet[Any], text: str) -> QuerySet[Any]:
    """The workloads whose name or namespace holds ``text`` (any case)."""
    text = text.strip()
    if not text:
        return rows
    return rows.filter(Q(name__icontains=text) | Q(namespace__icontains=text))


@dataclass(frozen=True)
class Moment:
    """One line of a workload's story: when, what happened, Kueue's own words, and a tone
    (ok, warn, bad or empty) for its mark."""

    at: dt.datetime | None
    title: str
    detail: str = ""
    tone: str = ""


# Kueue's conditions in people's words: (type, status) -> what it means; the reasons the
# reference names for evictions, preemptions and finishes, each in words.
CONDITION_WORDS: Mapping[tuple[str, str], tuple[str, str]] = {
    ("QuotaReserved", "True"): ("Quota reserved", "ok"),
    ("QuotaReserved", "False"): ("Waiting for quota", "warn"),
    ("Admitted", "True"): ("Admitted", "ok"),
    ("Admitted", "False"): ("Not admitted", "warn"),
    ("Evicted", "True"): ("Evicted", "bad"),
    ("Evicted", "False"): ("Admitted again after an eviction", "ok"),
    ("Preempted", "True"): ("Preempted", "bad"),
    ("Preempted", "False"): ("No longer preempted", ""),
    ("Requeued", "True"): ("Back in line", "warn"),
    ("Requeued", "False"): ("Waiting out its back-off before going back in line", "warn"),
    ("PodsReady", "True"): ("Its pods are ready", "ok"),
    ("PodsReady", "False"): ("Its pods are not ready", "warn"),
    ("Finished", "True"): ("Finished", ""),
}
REASON_WORDS: Mapping[str, str] = {
    "Preempted": "it was preempted for other work",
    "PodsReadyTimeout": "its pods were not ready in time",
    "AdmissionCheck": "an admission check failed",
    "ClusterQueueStopped": "its ClusterQueue was stopped",
    "LocalQueueStopped": "its LocalQueue was stopped",
    "Deactivated": "it was deactivated",
    "NodeFailures": "a node it ran on failed",
    "InClusterQueue": "by higher-priority work in its ClusterQueue",
    "InCohortReclamation": "by a queue of its cohort taking back its own quota",
    "InCohortFairSharing": "by fair sharing in its cohort",
    "InCohortReclaimWhileBorrowing": "by a queue of its cohort reclaiming quota while borrowing",
    "BackoffFinished": "its back-off ended",
    "Succeeded": "succeeded",
    "Failed": "failed",
    "Pending": "not enough quota yet",
    "Inadmissible": "it cannot be admitted as things stand",
    "WaitForStart": "waiting for its pods to start",
    "WaitForRecovery": "waiting for its pods to recover",
}


def reason_words(reason: str) -> str:
    """A Kueue reason in words: the reference's meaning, else its words (``FooBar``: Foo bar)."""
    return REASON_WORDS.get(reason) or (code_words(reason).lower() if reason else "")


def condition_moment(condition: Mapping[str, str]) -> Moment:
    """One of Kueue's conditions as a line of the story (its message, verbatim, beside it)."""
    kind, status = condition.get("type", ""), condition.get("status", "")
    title, tone = CONDITION_WORDS.get((kind, status), (f"{code_words(kind)}: {status}", ""))
    reason = condition.get("reason", "")
    if reason and reason not in (kind, "Admitted", "QuotaReserved", "Started"):
        title = f"{title}: {reason_words(reason)}"
    stamp = condition.get("lastTransitionTime")
    return Moment(_time(stamp), title, condition.get("message", ""), tone)


def story(workload: ObservedWorkload) -> list[Moment]:
    """A workload's story in time order: its creation, then each of Kueue's conditions at
    its last transition (Kueue keeps one per type: an earlier eviction shows as its count,
    not its own line), with the flavors it was admitted with, its evictions and back-off."""
    moments = [Moment(workload.created_at, "Created", f"in LocalQueue {workload.queue_name}")]
    for condition in workload.conditions or []:
        moment = condition_moment(condition)
        if condition.get("type") == "Admitted" and condition.get("status") == "True":
            flavors = ", ".join(f"{f} for {r}" for r, f in sorted((workload.flavors or {}).items()))
            if flavors:
                moment = Moment(moment.at, f"Admitted with {flavors}", moment.detail, moment.tone)
        moments.append(moment)
    if workload.evictions > 1:
        moments.append(
            Moment(
                None,
                f"Evicted {workload.evictions} times in all",
                "Kueue keeps the latest of each condition: the earlier ones are counted here.",
                "warn",
            )
        )
    if workload.requeue_at and not workload.admitted:
        moments.append(Moment(workload.requeue_at, "Its back-off ends: back in line", "", "warn"))
    epoch = dt.datetime.min.replace(tzinfo=dt.UTC)
    return sorted(moments, key=lambda m: (m.at is None, m.at or epoch))


def _time(stamp: str | None) -> dt.datetime | None:
    if not stamp:
        return None
    try:
        return dt.datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return None


def as_yaml(workload: ObservedWorkload, cluster: str) -> str:
    """What the last poll kept of the Workload, in Kubernetes' own shape (read-only: the
    poll keeps these fields, not the whole object)."""
    status: dict[str, Any] = {}
    if workload.cluster_queue:
        assignment: dict[str, Any] = {"flavors": dict(workload.flavors or {})}
        assignment["resourceUsage"] = dict(workload.requests or {})
        status["admission"] = {
            "clusterQueue": workload.cluster_queue,
            "podSetAssignments": [assignment],
        }
    elif workload.requests:
        status["resourceRequests"] = [{"resources": dict(workload.requests)}]
    if workload.conditions:
        status["conditions"] = list(workload.conditions)
    if workload.requeue_at or workload.evictions:
        requeue: dict[str, Any] = {"count": workload.evictions}
        if workload.requeue_at:
            requeue["requeueAt"] = workload.requeue_at.isoformat()
        status["requeueState"] = requeue
    body = {
        "kind": "Workload",
        "metadata": {
            "name": workload.name,
            "namespace": workload.namespace,
            "creationTimestamp": workload.created_at.isoformat() if workload.created_at else None,
            "annotations": {"quartermaster.io/cluster": cluster},
        },
        "spec": {"queueName": workload.queue_name, "priority": workload.priority},
        "status": status,
    }
    return str(yaml.safe_dump(body, sort_keys=False, default_flow_style=False))


def pods_of(workload: ObservedWorkload) -> list[ObservedPod]:
    """The pods the poll saw running for the workload (Kueue names it on them): its
    namespace's, so its viewer's own; each with its node and the GPUs it asks for."""
    return list(
        ObservedPod.objects.on(workload.cluster_id)
        .filter(namespace=workload.namespace, workload_name=workload.name)
        .only("namespace", "name", "node_name", "phase", "gpu_requests", "started_at", "cluster")
        .order_by("name")
    )
