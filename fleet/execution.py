"""Executing an approved MIG change, one recorded step at a time, resumable at any point.

Per node, in order: 1. cordon; 2. evict GPU pods (PodDisruptionBudgets respected, give up
after a timeout); 3. set ``nvidia.com/mig.config`` and remove the old state label in the same
patch; 4. wait for MIG Manager's ``success`` (``failed`` fails; ``pending`` too long is
stuck); 5. verify the node's allocatable is what the config promises (``success`` alone
proves nothing); 6. uncordon. Then the queue quota changes carried by the request go into
desired state for the cluster loop to apply.

:func:`advance` never sleeps: it does what it can and returns how long to wait. Each step
is recorded before its side effect and marked done after; a rerun skips done steps, and
every step is safe to repeat, so a worker killed anywhere resumes without repeating a
completed side effect.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from fleet.changes import State, transition
from fleet.models import MigChangeRequest, MigChangeStep
from fleet.notify import notify
from fleet.observe import pod_gpu_requests
from kube import EvictionBlocked, Gateway, ObjectRef
from portal.audit import record_audit

log = logging.getLogger(__name__)
STEPS = ("cordon", "evict", "label", "wait", "verify", "uncordon")
# A drain (a broken GPU) stops with the node cordoned and empty; returning it to service
# (the request's roll back) uncordons it.
DRAIN_STEPS = ("cordon", "evict")
RETURN_STEPS = ("uncordon",)
CONFIG_LABEL = "nvidia.com/mig.config"
STATE_LABEL = "nvidia.com/mig.config.state"
LOCK_BASE = 0x4D49_0000


@dataclass(frozen=True)
class Outcome:
    kind: str  # "done", "wait" or "failed"
    message: str = ""
    seconds: float = 0.0


def _done(message: str = "") -> Outcome:
    return Outcome("done", message)


def _wait(message: str, seconds: float = 3.0) -> Outcome:
    return Outcome("wait", message, seconds)


def _failed(message: str) -> Outcome:
    return Outcome("failed", message)


@contextmanager
def request_lock(request_id: int) -> Iterator[bool]:
    """One executor per request (a redelivered task and a scheduled recheck may overlap)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_lock(%s)", [LOCK_BASE + request_id])
        acquired = bool(cursor.fetchone()[0])
    try:
        yield acquired
    finally:
        if acquired:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_unlock(%s)", [LOCK_BASE + request_id])


def _gpu_resources(node: dict[str, Any]) -> dict[str, int]:
    allocatable = (node.get("status") or {}).get("allocatable") or {}
    out = {}
    for name, value in allocatable.items():
        if name.startswith("nvidia.com/") and str(value).isdigit() and int(value) > 0:
            out[name] = int(value)
    return out


def _describe(resources: dict[str, int]) -> str:
    return (
        ", ".join(f"{r.removeprefix('nvidia.com/')} x {n}" for r, n in sorted(resources.items()))
        or "nothing"
    )


def run_step(
    step: str,
    *,
    gateway: Gateway,
    node: str,
    config: str,
    promised: dict[str, int] | None,
    started: dt.datetime,
    now: dt.datetime,
) -> Outcome:
    """One step on one node; safe to run again."""
    elapsed = (now - started).total_seconds()
    if step == "cordon":
        gateway.cordon(node, True)
        return _done("cordoned: no new pods are placed on the node")
    if step == "uncordon":
        gateway.cordon(node, False)
        return _done("uncordoned: the node takes work again")
    if step == "evict":
        pods = [
            p
            for p in gateway.list("v1", "Pod", field_selector=f"spec.nodeName={node}")
            if (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
            and pod_gpu_requests(p)
        ]
        if not pods:
            return _done("no GPU pods left on the node")
        blocked = []
        for pod in pods:
            meta = pod["metadata"]
            if "deletionTimestamp" in meta:
                continue
            try:
                gateway.evict(meta["namespace"], meta["name"])
            except EvictionBlocked as exc:
                blocked.append(f"{meta['namespace']}/{meta['name']}: {exc.message}")
        waiting = ", ".join(f"{p['metadata']['namespace']}/{p['metadata']['name']}" for p in pods)
        if elapsed > settings.QM_EVICTION_TIMEOUT_SECONDS:
            return _failed(
                f"Gave up after {int(elapsed)} s: GPU pods still on the node ({waiting}). "
                + (" ".join(blocked) if blocked else "")
            )
        return _wait(
            f"evicting {waiting}" + (f" (blocked: {'; '.join(blocked)})" if blocked else ""), 2.0
        )
    if step == "label":
        live = gateway.get(ObjectRef("v1", "Node", node))
        if (live["metadata"].get("labels") or {}).get(CONFIG_LABEL) == config:
            return _done(f"{CONFIG_LABEL} is already {config}")
        # The state label is never cleared by MIG Manager: remove it in the same patch, or
        # a poll may read the previous "success".
        gateway.patch_node_labels(node, {CONFIG_LABEL: config, STATE_LABEL: None})
        return _done(f"set {CONFIG_LABEL}={config} and removed the old {STATE_LABEL}")
    if step == "wait":
        live = gateway.get(ObjectRef("v1", "Node", node))
        state = (live["metadata"].get("labels") or {}).get(STATE_LABEL, "")
        if state == "success":
            return _done("MIG Manager reports success")
        if state == "failed":
            return _failed(
                f"MIG Manager reported failed on {node} for {config} (a GPU still in use, or a "
                "config the GPUs cannot take). The node stays cordoned; roll back or fix and retry."
            )
        if elapsed > settings.QM_MIG_STUCK_SECONDS:
            return _failed(
                f"MIG Manager has not finished after {int(elapsed)} s (state "
                f"{state or 'not reported'}): treated as stuck. The node stays cordoned."
            )
        return _wait(
            f"MIG Manager state: {state or 'not reported yet'}", settings.QM_MIG_POLL_SECONDS
        )
    if step == "verify":
        live = gateway.get(ObjectRef("v1", "Node", node))
        offered = _gpu_resources(live)
        if promised is None or offered == promised:
            return _done(f"the node offers {_describe(offered)}")
        if not offered and elapsed < settings.QM_MIG_STUCK_SECONDS:
            return _wait(
                "the device plugin has not reported the new devices yet",
                settings.QM_MIG_POLL_SECONDS,
            )
        return _failed(
            f"{config} promises {_describe(promised)} but {node} offers {_describe(offered)}: "
            "MIG Manager's success proves nothing by itself."
        )
    raise ValueError(step)


def advance(
    request_id: int,
    *,
    gateway: Gateway,
    now: dt.datetime | None = None,
    stop_after: str | None = None,
) -> Outcome:
    """Run the request as far as it can go now. ``stop_after`` ("node:step") simulates a
    crash in tests: it stops right after that step's side effect, before recording it."""
    with request_lock(request_id) as acquired:
        if not acquired:
            return _wait("another worker is running this request", 5.0)
        request = MigChangeRequest.objects.get(pk=request_id)
        if request.state in (State.APPROVED, State.SCHEDULED):
            transition(request, State.RUNNING)
            record_audit(
                actor=None,
                event="mig_change.started",
                source="task",
                target=request,
                team=request.team,
            )
        if request.state not in (State.RUNNING, State.ROLLING_BACK):
            return _done(f"nothing to do: the request is {request.get_state_display().lower()}")
        rollback = request.state == State.ROLLING_BACK
        round_name = "rollback" if rollback else "apply"
        nodes_info = {n["name"]: n for n in request.assessment.get("nodes", [])}
        steps = (RETURN_STEPS if rollback else DRAIN_STEPS) if request.is_drain else STEPS
        for node in request.nodes:
            info = nodes_info.get(node, {})
            config = request.previous_configs.get(node, "") if rollback else request.target_config
            promised = (
                None
                if request.is_drain
                else _promised_by(config, info)
                if rollback
                else info.get("after")
            )
            for step in steps:
                record, _ = MigChangeStep.objects.get_or_create(
                    request=request,
                    round=round_name,
                    node=node,
                    step=step,
                    defaults={"started_at": now or timezone.now()},
                )
                if record.status == MigChangeStep.Status.DONE:
                    continue
                outcome = run_step(
                    step,
                    gateway=gateway,
                    node=node,
                    config=config,
                    promised=promised,
                    started=record.started_at,
                    now=now or timezone.now(),
                )
                if stop_after == f"{node}:{step}":
                    raise SystemExit(f"simulated crash after {node}:{step}")
                if outcome.kind == "wait":
                    MigChangeStep.objects.filter(pk=record.pk).update(message=outcome.message)
                    return outcome
                _finish_step(request, record, outcome)
                if outcome.kind == "failed":
                    _fail(request, f"{node}: {step} failed: {outcome.message}")
                    return outcome
        if rollback:
            _finish(request, State.ROLLED_BACK, "rolled_back")
            return _done("rolled back")
        _apply_queue_changes(request)
        _finish(request, State.SUCCEEDED, "succeeded")
        return _done("succeeded")


def _promised_by(config: str, info: dict[str, Any]) -> dict[str, int] | None:
    """What ``config`` makes of this node (rolling back restores the config, and the config
    decides the resources, whatever state the node was in before)."""
    from fleet.impact import Fleet, NodeFacts, promised_resources
    from fleet.models import MigConfig

    node = NodeFacts(
        info.get("name", ""), info.get("model"), int(info.get("gpu_count") or 0), "", "", {}, {}
    )
    custom = {c.name: (c.gpu_model, c.devices) for c in MigConfig.objects.all()}
    promised, _ = promised_resources(config, node, Fleet(nodes=[], custom_configs=custom))
    return promised


def _finish_step(request: MigChangeRequest, record: MigChangeStep, outcome: Outcome) -> None:
    status = MigChangeStep.Status.DONE if outcome.kind == "done" else MigChangeStep.Status.FAILED
    with transaction.atomic():
        MigChangeStep.objects.filter(pk=record.pk).update(
            status=status, message=outcome.message, finished_at=timezone.now()
        )
        record_audit(
            actor=None,
            event=f"mig_change.step.{status}",
            source="task",
            target=request,
            team=request.team,
            new={
                "node": record.node,
                "step": record.step,
                "round": record.round,
                "message": outcome.message,
            },
        )


def _fail(request: MigChangeRequest, message: str) -> None:
    _finish(request, State.FAILED, "failed", failure=message)


def _finish(request: MigChangeRequest, state: str, event: str, **fields: Any) -> None:
    """The request's last transition, its audit event (with ``fields``) and notification."""
    with transaction.atomic():
        transition(request, state, **fields)
        record_audit(
            actor=None,
            event=f"mig_change.{event}",
            source="task",
            target=request,
            team=request.team,
            new=fields or None,
        )
    notify(event, request)


def _apply_queue_changes(request: MigChangeRequest) -> None:
    """The ClusterQueue nominal quotas the request carries, into desired state (once)."""
    if not request.queue_changes:
        return
    record, _ = MigChangeStep.objects.get_or_create(
        request=request,
        round="apply",
        node="",
        step="queues",
        defaults={"started_at": timezone.now()},
    )
    if record.status == MigChangeStep.Status.DONE:
        return
    from queues.models import ClusterQueue
    from queues.services import save_cluster_queue

    changed = []
    with transaction.atomic():
        for change in request.queue_changes:
            cq = ClusterQueue.objects.select_for_update().get(name=change["cluster_queue"])
            groups = cq.resource_groups
            for group in groups:
                for flavor in group["flavors"]:
                    if flavor["name"] != change["flavor"]:
                        continue
                    for quota in flavor["resources"]:
                        if quota["name"] == change["resource"]:
                            quota["nominalQuota"] = str(change["to"])
            cq.resource_groups = groups
            save_cluster_queue(actor=None, cluster_queue=cq, source="task")
            changed.append(
                f"{cq.name} {change['flavor']} {change['resource']}: "
                f"{change['from']} -> {change['to']}"
            )
        MigChangeStep.objects.filter(pk=record.pk).update(
            status=MigChangeStep.Status.DONE,
            finished_at=timezone.now(),
            message="nominal quota changed: " + "; ".join(changed),
        )
