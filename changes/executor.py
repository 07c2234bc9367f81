"""Executing an approved MIG change or drain, one recorded step at a time, resumable at any
point.

Per node, in order: 1. cordon; 2. evict GPU pods (PodDisruptionBudgets respected, give up
after a timeout); 3. ask the MIG actuator for the config (``changes.actuator``: today the
``nvidia.com/mig.config`` label, the old state label removed in the same patch); 4. wait
for its ``success`` (``failed`` fails; ``pending`` too long is stuck); 5. verify the node's
allocatable is what the config promises (``success`` alone proves nothing); 6. uncordon.
Then the queue quota changes carried by the request go into desired state for the cluster
loop to apply (the ClusterQueues of the request's cluster); a rollback, once its nodes are
back, moves back the ones it made. A drain stops after step 2; returning the node to service
(the drain's roll back) uncordons it.

:func:`advance` never sleeps: it does what it can and returns how long to wait. Each step
is recorded before its side effect and marked done after; a rerun skips done steps, and
every step is safe to repeat, so a worker killed anywhere resumes without repeating a
completed side effect. Each step is one handler in :data:`HANDLERS`. A request is on one
cluster: every node read, label patch and eviction goes through that cluster's gateway.
"""

from __future__ import annotations

import datetime as dt
import logging
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from changes.actuator import FAILED, SUCCESS, MigActuator, get_actuator
from changes.approval import acting_for, transition
from changes.facts import custom_configs
from changes.impact import NodeChange
from changes.models import MigChangeRequest, MigChangeStep
from changes.notify import notify
from cluster.connection import gateway_for
from cluster.decode import gpu_offer, pod_gpu_requests
from gpus.catalog import promised_resources
from kube import EvictionBlocked, Gateway, ObjectRef
from portal.audit.record import Event, record_audit
from portal.infra.locks import advisory_lock
from queues.models import ClusterQueue
from queues.services import save_cluster_queue

log = logging.getLogger(__name__)
State = MigChangeRequest.State
STEPS = ("cordon", "evict", "label", "wait", "verify", "uncordon")
DRAIN_STEPS = ("cordon", "evict")
RETURN_STEPS = ("uncordon",)
LOCK_BASE = 0x4D49_0000


@dataclass(frozen=True)
class Outcome:
    kind: str  # "done", "wait" or "failed"
    message: str = ""
    seconds: float = 0.0
    evicted: tuple[str, ...] = ()  # namespace/name of the pods this run asked to evict


def _done(message: str = "") -> Outcome:
    return Outcome("done", message)


def _wait(message: str, seconds: float = 3.0) -> Outcome:
    return Outcome("wait", message, seconds)


def _failed(message: str) -> Outcome:
    return Outcome("failed", message)


@dataclass(frozen=True)
class Step:
    """What one step on one node works with."""

    gateway: Gateway
    actuator: MigActuator
    node: str
    config: str
    promised: dict[str, int] | None  # what the node must offer afterwards (None: no check)
    elapsed: float  # seconds since the step started (it may take several runs)


def cordon(step: Step) -> Outcome:
    step.gateway.cordon(step.node, True)
    return _done("cordoned: no new pods are placed on the node")


def uncordon(step: Step) -> Outcome:
    step.gateway.cordon(step.node, False)
    return _done("uncordoned: the node takes work again")


def evict(step: Step) -> Outcome:
    """Evict the node's GPU pods through the Eviction API (budgets respected); done once
    none is left, failed after QM_EVICTION_TIMEOUT_SECONDS."""
    pods = [
        p
        for p in step.gateway.list("v1", "Pod", field_selector=f"spec.nodeName={step.node}")
        if (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
        and pod_gpu_requests(p)
    ]
    if not pods:
        return _done("no GPU pods left on the node")
    blocked, evicted = [], []
    for pod in pods:
        meta = pod["metadata"]
        if "deletionTimestamp" in meta:
            continue
        try:
            step.gateway.evict(meta["namespace"], meta["name"])
            evicted.append(f"{meta['namespace']}/{meta['name']}")
        except EvictionBlocked as exc:
            blocked.append(_held(meta["namespace"], meta["name"], exc))
    waiting = ", ".join(f"{p['metadata']['namespace']}/{p['metadata']['name']}" for p in pods)
    if step.elapsed > settings.QM_EVICTION_TIMEOUT_SECONDS:
        return Outcome(
            "failed",
            f"Gave up after {int(step.elapsed)} s: GPU pods still on the node ({waiting}). "
            + ("; ".join(blocked) + "." if blocked else ""),
            evicted=tuple(evicted),
        )
    return Outcome(
        "wait",
        f"evicting {waiting}" + (f" (blocked: {'; '.join(blocked)})" if blocked else ""),
        2.0,
        tuple(evicted),
    )


def _held(namespace: str, pod: str, exc: EvictionBlocked) -> str:
    """Which budget holds a pod, in the server's words (429: "Cannot evict pod as it would
    violate the pod's disruption budget.", the cause naming the budget)."""
    if not exc.budget:
        return f"{namespace}/{pod}: {exc.message}"
    # The server's sentence names the budget bare ("The disruption budget keep needs…"):
    # qualified, the one redaction rule (portal.vocabulary.names) can hide it from others.
    says = re.sub(
        rf"(?<![\w./-]){re.escape(exc.budget)}(?![\w./-])",
        f"{namespace}/{exc.budget}",
        exc.budget_says,
    )
    return f"{namespace}/{pod} is held by PodDisruptionBudget {namespace}/{exc.budget} ({says})"


def request_layout(step: Step) -> Outcome:
    asked, message = step.actuator.request(step.gateway, step.node, step.config)
    if asked:
        return _done(message)
    if step.elapsed > settings.QM_MIG_STUCK_SECONDS:
        return _failed(f"MIG Manager did not take the request after {int(step.elapsed)} s.")
    return _wait(message, settings.QM_MIG_POLL_SECONDS)


def wait_for_layout(step: Step) -> Outcome:
    state = step.actuator.progress(step.gateway, step.node)
    if state == SUCCESS:
        return _done("MIG Manager reports success")
    if state == FAILED:
        return _failed(
            f"MIG Manager reported failed on {step.node} for {step.config} (a GPU still in use, "
            "or a config the GPUs cannot take). The node stays cordoned; roll back or fix and "
            "retry."
        )
    if step.elapsed > settings.QM_MIG_STUCK_SECONDS:
        return _failed(
            f"MIG Manager has not finished after {int(step.elapsed)} s (state "
            f"{state or 'not reported'}): treated as stuck. The node stays cordoned."
        )
    return _wait(f"MIG Manager state: {state or 'not reported yet'}", settings.QM_MIG_POLL_SECONDS)


def verify(step: Step) -> Outcome:
    """The node offers exactly what the config promises (the device plugin may take a
    moment to report the new devices)."""
    live = step.gateway.get(ObjectRef("v1", "Node", step.node))
    offered = gpu_offer((live.get("status") or {}).get("allocatable") or {})
    if step.promised is None or offered == step.promised:
        return _done(f"the node offers {_describe(offered)}")
    if not offered and step.elapsed < settings.QM_MIG_STUCK_SECONDS:
        return _wait(
            "the device plugin has not reported the new devices yet",
            settings.QM_MIG_POLL_SECONDS,
        )
    return _failed(
        f"{step.config} promises {_describe(step.promised)} but {step.node} offers "
        f"{_describe(offered)}: MIG Manager's success proves nothing by itself."
    )


# The step names are stored with each recorded step ("label" is the actuator's request).
HANDLERS: dict[str, Callable[[Step], Outcome]] = {
    "cordon": cordon,
    "evict": evict,
    "label": request_layout,
    "wait": wait_for_layout,
    "verify": verify,
    "uncordon": uncordon,
}


def _describe(resources: dict[str, int]) -> str:
    return (
        ", ".join(f"{r.removeprefix('nvidia.com/')} x {n}" for r, n in sorted(resources.items()))
        or "nothing"
    )


@contextmanager
def request_lock(request_id: int) -> Iterator[bool]:
    """One executor per request (a redelivered task and a scheduled recheck may overlap)."""
    with advisory_lock(LOCK_BASE + request_id) as taken:
        yield taken


def advance(
    request_id: int, *, gateway: Gateway | None = None, now: dt.datetime | None = None
) -> Outcome:
    """Run the request as far as it can go now: 1. start it (approved or scheduled becomes
    running); 2. run each node's steps in order, skipping those done; 3. finish it
    (succeeded, after the queue changes, or rolled back). ``gateway``: to the request's
    cluster (by default the one its cluster row names)."""
    with request_lock(request_id) as acquired:
        if not acquired:
            return _wait("another worker is running this request", 5.0)
        request = MigChangeRequest.objects.select_related("cluster").get(pk=request_id)
        gateway = gateway or gateway_for(request.cluster)
        if request.state in (State.APPROVED, State.SCHEDULED):
            transition(request, State.RUNNING)
            record_audit(
                actor=acting_for(request),
                event=Event.MIG_CHANGE_STARTED,
                source="task",
                target=request,
                team=request.team,
            )
        if request.state not in (State.RUNNING, State.ROLLING_BACK):
            return _done(f"nothing to do: the request is {request.get_state_display().lower()}")
        rollback = request.state == State.ROLLING_BACK
        for node in request.nodes:
            outcome = _run_node(request, node, gateway=gateway, rollback=rollback, now=now)
            if outcome is not None:
                return outcome
        if rollback:
            _restore_queue_changes(request)
            _finish(request, State.ROLLED_BACK, "rolled_back")
            return _done("rolled back")
        _apply_queue_changes(request)
        _finish(request, State.SUCCEEDED, "succeeded")
        return _done("succeeded")


def _run_node(
    request: MigChangeRequest,
    node: str,
    *,
    gateway: Gateway,
    rollback: bool,
    now: dt.datetime | None,
) -> Outcome | None:
    """The node's steps not done yet; the outcome to stop on (wait or failed), or None when
    every step of the node is done."""
    round_name = "rollback" if rollback else "apply"
    info = next((n for n in request.impact.nodes if n.name == node), None)
    config = request.previous_configs.get(node, "") if rollback else request.target_config
    steps: tuple[str, ...]
    if rollback:
        steps = rollback_steps(steps_that_ran(request, node), drain=request.is_drain)
        promised = None if request.is_drain else _promised_by(config, node, info)
    elif request.is_drain:
        steps, promised = DRAIN_STEPS, None
    else:
        steps, promised = STEPS, (info.after if info is not None else None)
    actuator = get_actuator()
    for name in steps:
        record = MigChangeStep.objects.filter(
            request=request, round=round_name, node=node, step=name
        ).first()
        if record is not None and record.status == MigChangeStep.Status.DONE:
            continue
        aborted = _abort_of(request, node, name)
        if aborted is not None:
            # A step that never started gets no record: the records say what ran, and a
            # rollback undoes exactly those.
            if record is not None:
                _finish_step(request, record, aborted)
            _finish(request, State.FAILED, "aborted", failure=aborted.message)
            return aborted
        if record is None:
            record, _ = MigChangeStep.objects.get_or_create(
                request=request,
                round=round_name,
                node=node,
                step=name,
                defaults={"started_at": now or timezone.now()},
            )
        elapsed = ((now or timezone.now()) - record.started_at).total_seconds()
        outcome = HANDLERS[name](Step(gateway, actuator, node, config, promised, elapsed))
        if outcome.evicted:
            record.pods = sorted({*record.pods, *outcome.evicted})
            MigChangeStep.objects.filter(pk=record.pk).update(pods=record.pods)
        if outcome.kind == "wait":
            MigChangeStep.objects.filter(pk=record.pk).update(message=outcome.message)
            return outcome
        _finish_step(request, record, outcome)
        if outcome.kind == "failed":
            _finish(
                request, State.FAILED, "failed", failure=f"{node}: {name} failed: {outcome.message}"
            )
            return outcome
    return None


def steps_that_ran(request: MigChangeRequest, node: str) -> set[str]:
    """The steps of the change's apply round that started on ``node`` (a step is recorded
    just before its side effect, and a step an abort stopped before it began is not)."""
    return set(
        MigChangeStep.objects.filter(request=request, round="apply", node=node).values_list(
            "step", flat=True
        )
    )


def rollback_steps(ran: set[str], *, drain: bool = False) -> tuple[str, ...]:
    """What rolling back does on a node, given the apply round's steps that ran there: it
    undoes exactly those. A node whose layout was asked for (the label step started) goes
    back through every step, the previous config asked for again; a node only cordoned (and
    perhaps drained: an evicted pod does not come back) is uncordoned, no pod touched; a
    node the change never reached is left alone. A drain's return to service uncordons."""
    if drain:
        return RETURN_STEPS
    if "label" in ran:
        return STEPS
    if "cordon" in ran:
        return RETURN_STEPS
    return ()


def _abort_of(request: MigChangeRequest, node: str, step: str) -> Outcome | None:
    """The failed outcome an admin's abort makes of the step about to run (None when no
    abort was asked): the change stops here, at a step boundary, the node cordoned."""
    asked = (
        MigChangeRequest.objects.filter(pk=request.pk, abort_requested_at__isnull=False)
        .values_list("abort_requested_by__username", flat=True)
        .first()
    )
    if asked is None:
        return None
    return _failed(
        f"Aborted by {asked or 'an admin'} before {step} on {node}. The node stays cordoned "
        "with the steps done so far: roll back to restore the previous config, or fix it and "
        "uncordon it."
    )


def _promised_by(config: str, node: str, info: NodeChange | None) -> dict[str, int] | None:
    """What ``config`` makes of this node (rolling back restores the config, and the config
    decides the resources, whatever state the node was in before)."""
    promised, _ = promised_resources(
        config,
        node=node if info is None else info.name,
        model=None if info is None else info.model,
        gpu_count=0 if info is None else info.gpu_count,
        custom=custom_configs(),
    )
    return promised


def _finish_step(request: MigChangeRequest, record: MigChangeStep, outcome: Outcome) -> None:
    status = MigChangeStep.Status.DONE if outcome.kind == "done" else MigChangeStep.Status.FAILED
    message = outcome.message
    if record.pods:  # the pods it evicted over all its runs, named for the teams they hit
        message = f"evicted {', '.join(record.pods)}; {message}"
    with transaction.atomic():
        MigChangeStep.objects.filter(pk=record.pk).update(
            status=status, message=message, finished_at=timezone.now()
        )
        record_audit(
            actor=acting_for(request),
            event=Event.MIG_CHANGE_STEP_DONE
            if status == MigChangeStep.Status.DONE
            else Event.MIG_CHANGE_STEP_FAILED,
            source="task",
            target=request,
            team=request.team,
            new={
                "node": record.node,
                "step": record.step,
                "round": record.round,
                "message": message,
                **({"evicted": record.pods} if record.pods else {}),
            },
        )


def _finish(request: MigChangeRequest, state: str, event: str, **fields: Any) -> None:
    """The request's last transition, its audit event (with ``fields``) and notification."""
    with transaction.atomic():
        transition(request, state, **fields)
        record_audit(
            actor=acting_for(request),
            event=Event[f"MIG_CHANGE_{event.upper()}"],  # one of the enum's (KeyError if not)
            source="task",
            target=request,
            team=request.team,
            new=fields or None,
        )
    notify(event, request)


def _queue_step(request: MigChangeRequest, round_: str) -> MigChangeStep | None:
    """The request's one "queues" step of a round (apply or rollback), or None when an
    earlier run of it finished (it is done once)."""
    record, _ = MigChangeStep.objects.get_or_create(
        request=request,
        round=round_,
        node="",
        step="queues",
        defaults={"started_at": timezone.now()},
    )
    return None if record.status == MigChangeStep.Status.DONE else record


def _queue_step_done(
    record: MigChangeStep, done: tuple[str, list[str]], left: tuple[str, list[str]]
) -> None:
    """The queues step finished, saying what it moved and what it left as someone set it
    since ``left[0]`` (the approval, the change)."""
    (verb, moved), (since, kept) = done, left
    message = "; ".join(
        ([f"nominal quota {verb}: " + "; ".join(moved)] if moved else [])
        + ([f"changed by someone since {since}, so " + "; ".join(kept)] if kept else [])
    )
    MigChangeStep.objects.filter(pk=record.pk).update(
        status=MigChangeStep.Status.DONE, finished_at=timezone.now(), message=message
    )


def _apply_queue_changes(request: MigChangeRequest) -> None:
    """The ClusterQueue nominal quotas the request carries, into desired state (once)."""
    if not request.queue_changes:
        return
    record = _queue_step(request, "apply")
    if record is None:
        return
    changed, left, moved = [], [], []
    with transaction.atomic():
        for change in request.queue_changes:
            cq = (
                ClusterQueue.objects.select_for_update()
                .filter(cluster=request.cluster_id, name=change["cluster_queue"])
                .first()
            )
            what = f"{change['cluster_queue']} {change['flavor']} {change['resource']}"
            if cq is None:  # deleted since the approval: nothing to carry the change into
                left.append(f"{what} not changed (the ClusterQueue was deleted)")
                continue
            now = cq.nominal_quota(change["flavor"], change["resource"])
            if cq.quota().get((change["flavor"], change["resource"])) != change["from"]:
                # Someone changed it since the approval: their value stands (a carried
                # change never undoes a later decision, nor raises a quota it meant to cut).
                left.append(f"{what} left at {now or 'none'} (approved from {change['from']})")
                continue
            cq.set_nominal_quota(change["flavor"], change["resource"], str(change["to"]))
            save_cluster_queue(
                actor=acting_for(request), cluster_queue=cq, source="task", serves=request
            )
            changed.append(f"{what}: {change['from']} -> {change['to']}")
            moved.append(dict(change))
        MigChangeRequest.objects.filter(pk=request.pk).update(queues_moved=moved)
        _queue_step_done(record, ("changed", changed), ("the approval", left))


def _restore_queue_changes(request: MigChangeRequest) -> None:
    """The nominal quotas the change moved, moved back (once), now that the rollback has
    brought the nodes' capacity back: a quota someone set since stays as they set it."""
    request.refresh_from_db(fields=["queues_moved"])
    if not request.queues_moved:
        return
    record = _queue_step(request, "rollback")
    if record is None:
        return
    restored, left = [], []
    with transaction.atomic():
        for change in request.queues_moved:
            key = (change["flavor"], change["resource"])
            what = f"{change['cluster_queue']} {change['flavor']} {change['resource']}"
            cq = (
                ClusterQueue.objects.select_for_update()
                .filter(cluster=request.cluster_id, name=change["cluster_queue"])
                .first()
            )
            if cq is None:
                left.append(f"{what} not restored (the ClusterQueue was deleted)")
                continue
            now = cq.quota().get(key)
            if now == change["from"]:  # an earlier run of this rollback restored it
                restored.append(f"{what}: {change['to']} -> {change['from']}")
                continue
            if now != change["to"]:
                shown = cq.nominal_quota(*key) or "none"
                left.append(f"{what} left at {shown} (the change set {change['to']})")
                continue
            cq.set_nominal_quota(*key, str(change["from"]))
            save_cluster_queue(
                actor=acting_for(request), cluster_queue=cq, source="task", serves=request
            )
            restored.append(f"{what}: {change['to']} -> {change['from']}")
        _queue_step_done(record, ("restored", restored), ("the change", left))
        record_audit(
            actor=acting_for(request),
            event=Event.MIG_CHANGE_QUEUES_RESTORED,
            source="task",
            target=request,
            team=request.team,
            new={"restored": restored, "left": left},
        )
