"""Notifications of MIG change and drain requests (new, decided, succeeded, failed,
rolled back), through the portal's webhook and e-mail hooks."""

from __future__ import annotations

from changes.models import MigChangeRequest
from portal.notify import notify_event

SUBJECTS = {
    "requested": "MIG change #{id} requested: {nodes} -> {config}",
    "approved": "MIG change #{id} approved",
    "rejected": "MIG change #{id} rejected",
    "succeeded": "MIG change #{id} succeeded",
    "failed": "MIG change #{id} failed",
    "aborted": "MIG change #{id} aborted",
    "rolled_back": "MIG change #{id} rolled back",
}


def payload(request: MigChangeRequest) -> dict[str, object]:
    return {
        "id": request.pk,
        "kind": request.kind,
        "state": request.state,
        "team": request.team.slug if request.team else None,
        "nodes": request.nodes,
        "target_config": request.target_config,
        "verdict": request.verdict,
        "reason": request.reason,
        "failure": request.failure,
        "requested_by": request.requested_by.get_username() if request.requested_by else None,
        "decided_by": request.decided_by.get_username() if request.decided_by else None,
    }


def subject(event: str, request: MigChangeRequest) -> str:
    if request.is_drain:
        what = SUBJECTS[event].split(":")[0].replace("MIG change", "Drain")
        return what.format(id=request.pk) + (
            f": cordon and drain {', '.join(request.nodes)}" if event == "requested" else ""
        )
    return SUBJECTS[event].format(
        id=request.pk, nodes=", ".join(request.nodes), config=request.target_config
    )


def notify(event: str, request: MigChangeRequest) -> None:
    notify_event(f"mig_change.{event}", subject(event, request), payload(request))
