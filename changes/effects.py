"""What a destructive action on a MIG change or drain will do, in words, for the page that
asks to confirm it: cancelling, aborting, rolling back, returning a node to service.

The pages ask before they act (a confirmation page listing these effects, then a confirm);
the API acts at once, its explicit call being the confirmation. What a rollback does is
what the executor will do (:func:`changes.executor.rollback_steps` over the steps that ran),
so the page and the run cannot disagree. These pages are for platform admins and the
requester (cancel): pods are named by namespace/name as the change's own page names them
to those who may decide it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from changes.executor import RETURN_STEPS, STEPS, rollback_steps, steps_that_ran
from changes.models import MigChangeRequest
from cluster.models import ObservedPod

State = MigChangeRequest.State

# The destructive verbs the pages confirm first, with the page's title and button.
CONFIRMED: dict[str, tuple[str, str]] = {
    "cancel": ("Cancel this request?", "Cancel the request"),
    "abort": ("Abort this change?", "Abort at the next step"),
    "rollback": ("Roll back this change?", "Roll back"),
}


@dataclass(frozen=True)
class Effects:
    """What the action does: a title, the button's words, one line per effect (node by
    node, then quotas), and what it leaves as it is."""

    title: str
    button: str
    lines: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)


def effects_of(action: str, change: MigChangeRequest) -> Effects:
    """The effects of ``action`` (one of :data:`CONFIRMED`) on ``change`` now."""
    title, button = CONFIRMED[action]
    if change.is_drain and action == "rollback":
        title, button = "Return the node to service?", "Return to service"
    if action == "cancel":
        return _cancel(change, title, button)
    if action == "abort":
        return _abort(change, title, button)
    return _rollback(change, title, button)


def _cancel(change: MigChangeRequest, title: str, button: str) -> Effects:
    approved = change.state in (State.APPROVED, State.SCHEDULED)
    lines = ["The request is withdrawn; it will never run."]
    if approved and change.decided_by is not None:
        lines.append(f"Its approval by {change.decided_by.get_username()} is void.")
    return Effects(
        title,
        button,
        lines,
        ["No node is cordoned, no pod evicted, no MIG config or quota changed."],
    )


def _abort(change: MigChangeRequest, title: str, button: str) -> Effects:
    running = "rollback" if change.state == State.ROLLING_BACK else "change"
    lines = [
        f"The {running} stops before its next step; the step running now is not undone.",
        "A node it has cordoned stays cordoned (no new pods are placed on it) until you "
        "roll back or uncordon it.",
    ]
    evicted = sorted({pod for step in change.steps.all() for pod in step.pods})
    if evicted:
        lines.append(f"Pods it already evicted stay evicted: {', '.join(evicted)}.")
    return Effects(
        title,
        button,
        lines,
        ["No further pod is evicted and no further MIG config is set."],
    )


def _rollback(change: MigChangeRequest, title: str, button: str) -> Effects:
    lines: list[str] = []
    evicts = False
    for node in change.nodes:
        steps = rollback_steps(steps_that_ran(change, node), drain=change.is_drain)
        if steps == STEPS:
            evicts = True
            lines.append(_full_rollback(change, node))
        elif steps == RETURN_STEPS:
            what = (
                "its GPUs return to the fleet"
                if change.is_drain
                else "its MIG config was never changed"
            )
            lines.append(f"{node}: uncordoned ({what}); no pod is evicted.")
        else:
            lines.append(f"{node}: left as it is (the change never reached it).")
    for moved in change.queues_moved or []:
        lines.append(
            f"ClusterQueue {moved['cluster_queue']}: nominal quota of "
            f"{moved['resource']} on {moved['flavor']} set back from {moved['to']} to "
            f"{moved['from']} (unless someone has set it since)."
        )
    unchanged = [] if evicts else ["No pod is evicted and no MIG config is set."]
    if not change.queues_moved:
        unchanged.append("No ClusterQueue quota changes.")
    return Effects(title, button, lines, unchanged)


def _full_rollback(change: MigChangeRequest, node: str) -> str:
    """A node whose layout the change asked for: every step again, the previous config."""
    previous = change.previous_configs.get(node, "") or "its previous config"
    pods = sorted(
        f"{p.namespace}/{p.name}"
        for p in ObservedPod.objects.on(change.cluster_id)
        .filter(node_name=node)
        .exclude(phase__in=("Succeeded", "Failed"))
        .only("namespace", "name", "gpu_requests")
        if p.gpu_requests
    )
    evicted = f"its GPU pods evicted ({', '.join(pods)})" if pods else "no GPU pod runs there now"
    return (
        f"{node}: cordoned, {evicted}, nvidia.com/mig.config set back to {previous}, "
        "then uncordoned once MIG Manager reports success and the node offers what it "
        "promises."
    )
