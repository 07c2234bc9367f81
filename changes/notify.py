"""Notifications of MIG change and drain requests (new, decided, succeeded, failed,
rolled back), through the portal's webhook and e-mail hooks."""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth import get_user_model

from changes.models import MigChangeRequest
from portal.notify import notify_event, notify_people

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
        "pool": request.pool_label or None,
        "target_config": request.target_config,
        "verdict": request.verdict,
        "reason": request.reason,
        "failure": request.failure,
        "requested_by": request.requested_by.get_username() if request.requested_by else None,
        "decided_by": request.decided_by.get_username() if request.decided_by else None,
        "teams_hit": sorted(t.slug for t in request.teams_hit.all()),
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
    tell_teams_hit(event, request)


def tell_teams_hit(event: str, request: MigChangeRequest) -> None:
    """Each member of a team the change hits, by e-mail: what it does to their team and
    where to read it (the names of their own pods included)."""
    for team in request.teams_hit.all():
        if request.team_id == team.pk:
            continue  # the asking team follows its own request
        people = list(
            get_user_model()
            .objects.filter(memberships__team=team, is_active=True)
            .exclude(email="")
            .values_list("email", flat=True)
        )
        notify_people(subject(event, request), body(request, team.slug), people)


def body(request: MigChangeRequest, team: str) -> str:
    """The mail to a team a change hits."""
    evicted = [
        f"{e['namespace']}/{e['pod']} on {e['node']}"
        for e in request.assessment.get("evictions", [])
        if e.get("team") == team
    ]
    lines = [
        f"{request} ({request.get_state_display().lower()}) affects team {team}.",
        f"Asked by {request.team.slug if request.team else 'the portal'}: {request.reason}",
    ]
    if evicted:
        lines.append("Your pods it evicts: " + "; ".join(evicted) + ".")
    lines.extend(request.assessment.get("reasons", []))
    lines.append(f"Read it: {settings.QM_PUBLIC_URL.rstrip('/')}/changes/{request.pk}/")
    return "\n".join(lines)
