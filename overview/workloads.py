"""Kueue Workloads as the last poll saw them, for the Workloads list and one workload's page
(and their API): which workloads a user may see, each one's state, and its story told from
Kueue's conditions.

A user sees the workloads of their teams' namespaces (every namespace for approvers and
platform admins), on the clusters they may see; another team's workload is no workload to
them (its page is a 404, as the API's detail), so no other team's name ever reaches a lead.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
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

from cluster.decode import PREEMPTOR_UID
from cluster.models import ObservedEvent, ObservedPod, ObservedWorkload
from portal.access.permissions import sees_every_team, user_id
from portal.vocabulary.names import PodNames
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
# Other words for a state, accepted by the list's filter: Kueue says "pending" (its
# visibility API's pendingworkloads, kueuectl's PENDING) for what the portal calls waiting.
STATE_ALIASES: Mapping[str, str] = {"pending": "waiting"}
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
    count: int = 0  # an event's: how often Kueue said it (0: a condition, said once)
    last: dt.datetime | None = None  # an event's: when Kueue said it last
    # "condition" (one of Kueue's), "event" (one of Kueue's the portal kept) or "portal"
    # (what the portal reads of the Workload itself: its creation, evictions, back-off)
    source: str = "condition"


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


# Kueue's events about a Workload in people's words (its reasons, as real Kueue v0.19 writes
# them: tests/data/kueue-samples/events-workload-story.json); ``EvictedDueTo<Reason>`` says
# the reason's words. Any other reason is said in its own words.
EVENT_WORDS: Mapping[str, tuple[str, str]] = {
    "QuotaReserved": ("Quota reserved", "ok"),
    "Admitted": ("Admitted", "ok"),
    "Pending": ("Waiting for quota", "warn"),
    "Preempted": ("Preempted", "bad"),
    "PreemptedWorkload": ("Preempted a workload to make room for it", ""),
    "Finished": ("Finished", ""),
}
EVICTED_DUE_TO = "EvictedDueTo"
# Which event tells the same as a condition (its type and status): the condition's line is
# left out where such an event was seen around its transition (the event has its count).
SAME_AS_CONDITION: Mapping[tuple[str, str], str] = {
    ("QuotaReserved", "True"): "QuotaReserved",
    ("QuotaReserved", "False"): "Pending",
    ("Admitted", "True"): "Admitted",
    ("Preempted", "True"): "Preempted",
    ("Evicted", "True"): EVICTED_DUE_TO,
}
SAME_MOMENT = dt.timedelta(seconds=5)


def event_title(reason: str) -> tuple[str, str]:
    """An event's reason as a title and tone."""
    if reason in EVENT_WORDS:
        return EVENT_WORDS[reason]
    if reason.startswith(EVICTED_DUE_TO) and len(reason) > len(EVICTED_DUE_TO):
        return f"Evicted: {reason_words(reason[len(EVICTED_DUE_TO) :])}", "bad"
    return code_words(reason) if reason else "Event", ""


# The preemptor's PreemptedWorkload event names its victim: "Preempted workload
# team-a/job-x (UID: ...) in ClusterQueue cq-train; ..." (real Kueue's words).
VICTIM = re.compile(
    r"\bworkload ([a-z0-9](?:[-a-z0-9]*[a-z0-9])?)/([a-z0-9][-.a-z0-9]*) \(UID: [^)]*\)"
)


def event_message(event: ObservedEvent, names: PodNames | None) -> str:
    """Kueue's message, for a viewer whose ``names`` these are (None: every name): the
    workload it names by UID (a preemptor) said as :func:`preemptor_said`; a victim it
    names, of a namespace the viewer may not name, said as "another team's workload" with
    its UID; every other ``namespace/name`` redacted by the naming rule."""
    message = event.message
    if names is not None and not names.everyone:
        message = VICTIM.sub(
            lambda m: (
                m.group(0)
                if names.named(event.cluster_id, m.group(1))
                else "another team's workload"
            ),
            message,
        )
    message = preemptor_said(message, event.preemptor, event.cluster_id, names)
    return message if names is None else names.redact(message, event.cluster_id)


def preemptor_said(
    message: str, preemptor: str, cluster_id: int | None, names: PodNames | None
) -> str:
    """``message`` with the workload Kueue names by UID (a preemptor, ``namespace/name``
    when the poll saw it) said by its name to who may name it, as "another team's workload"
    to anyone else (also when the poll could not tell whose it was)."""
    if not PREEMPTOR_UID.search(message):
        return message
    space = preemptor.partition("/")[0]
    if preemptor and (names is None or names.named(cluster_id, space)):
        return PREEMPTOR_UID.sub(f"(Workload {preemptor})", message)
    if names is not None and not names.everyone:
        return PREEMPTOR_UID.sub("(another team's workload)", message)
    return message


def event_moment(event: ObservedEvent, names: PodNames | None) -> Moment:
    """One of Kueue's events as a line of the story: when it first happened, how often and
    when last, its message (redacted for the viewer)."""
    title, tone = event_title(event.reason)
    if event.type == "Warning" and not tone:
        tone = "warn"
    return Moment(
        event.first_seen,
        title,
        event_message(event, names),
        tone,
        count=event.count,
        last=event.last_seen,
        source="event",
    )


def _told_by_an_event(condition: Mapping[str, str], events: Sequence[ObservedEvent]) -> bool:
    reason = SAME_AS_CONDITION.get((condition.get("type", ""), condition.get("status", "")))
    at = _time(condition.get("lastTransitionTime"))
    if reason is None or at is None:
        return False
    return any(
        e.reason.startswith(reason)
        and e.first_seen - SAME_MOMENT <= at <= e.last_seen + SAME_MOMENT
        for e in events
    )


def story(
    workload: ObservedWorkload,
    events: Sequence[ObservedEvent] = (),
    names: PodNames | None = None,
) -> list[Moment]:
    """A workload's story in time order: its creation, Kueue's ``events`` about it (each
    with how often and when last; their messages redacted for the viewer whose ``names``
    these are), and each of Kueue's conditions at its last transition where no event tells
    the same (Kueue keeps one condition per type: without its events an earlier eviction
    shows as its count), with the flavors it was admitted with and its back-off."""
    moments = [
        Moment(
            workload.created_at, "Created", f"in LocalQueue {workload.queue_name}", source="portal"
        )
    ]
    flavors = ", ".join(f"{f} for {r}" for r, f in sorted((workload.flavors or {}).items()))
    admissions = [e for e in events if e.reason == "Admitted"]
    for event in events:
        moment = event_moment(event, names)
        if flavors and workload.admitted and admissions and event is admissions[-1]:
            moment = replace(moment, title=f"Admitted with {flavors}")
        moments.append(moment)
    for condition in workload.conditions or []:
        if _told_by_an_event(condition, events):
            continue
        moment = condition_moment(condition)
        if condition.get("type") == "Admitted" and condition.get("status") == "True" and flavors:
            moment = Moment(moment.at, f"Admitted with {flavors}", moment.detail, moment.tone)
        moments.append(moment)
    told = sum(1 for e in events if e.reason.startswith(EVICTED_DUE_TO))
    moments = [_preemptor_in(m, events, workload.cluster_id, names) for m in moments]
    if workload.evictions > max(told, 1):
        moments.append(
            Moment(
                None,
                f"Evicted {workload.evictions} times in all",
                "Kueue keeps the latest of each condition, and the portal the events it saw: "
                "the earlier evictions are counted here.",
                "warn",
                source="portal",
            )
        )
    if workload.requeue_at and not workload.admitted:
        moments.append(
            Moment(
                workload.requeue_at, "Its back-off ends: back in line", "", "warn", source="portal"
            )
        )
    epoch = dt.datetime.min.replace(tzinfo=dt.UTC)
    return sorted(moments, key=lambda m: (m.at is None, m.at or epoch))


def _preemptor_in(
    moment: Moment,
    events: Sequence[ObservedEvent],
    cluster_id: int | None,
    names: PodNames | None,
) -> Moment:
    """A condition's line whose message names a preemptor by UID (Evicted, Preempted,
    Requeued carry it), said as the event of the same UID says it."""
    found = PREEMPTOR_UID.search(moment.detail) if moment.source == "condition" else None
    if found is None:
        return moment
    preemptor = next(
        (e.preemptor for e in events if e.preemptor and found.group(0) in e.message), ""
    )
    return replace(moment, detail=preemptor_said(moment.detail, preemptor, cluster_id, names))


def events_of(workload: ObservedWorkload) -> list[ObservedEvent]:
    """The events the portal kept about the workload (its newest, oldest first)."""
    rows = (
        ObservedEvent.objects.on(workload.cluster_id)
        .filter(namespace=workload.namespace, workload_name=workload.name)
        .order_by("-last_seen", "-id")[:EVENTS_SHOWN]
    )
    return sorted(rows, key=lambda e: (e.first_seen, e.last_seen, e.pk))  # as Kueue said them


EVENTS_SHOWN = 50


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
