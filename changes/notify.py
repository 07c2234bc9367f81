"""Notifications of MIG change and drain requests (new, decided, succeeded, failed,
rolled back, and the pods they evicted, per team), through the portal's hooks and people's
subscriptions."""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth import get_user_model

from changes.models import MigChangeRequest, MigChangeStep
from portal.notifications.send import notify_event, notify_people
from portal.vocabulary.names import PodNames
from tenants.models import Namespace

SUBJECTS = {
    "requested": "MIG change #{id} requested: {nodes} -> {config}",
    "approved": "MIG change #{id} approved",
    "rejected": "MIG change #{id} rejected",
    "succeeded": "MIG change #{id} succeeded",
    "failed": "MIG change #{id} failed",
    "aborted": "MIG change #{id} aborted",
    "rolled_back": "MIG change #{id} rolled back",
}
# The events that end a run: the pods it evicted are told then, to each team they belong to
# (a rollback follows a failure, which told them already).
ENDS = ("succeeded", "failed", "aborted")


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
    if event in ENDS:
        tell_evictions(request)


def evicted_by_team(request: MigChangeRequest) -> dict[str, list[str]]:
    """The pods (``namespace/name``) the request's steps evicted, by the team owning their
    namespace (two queries)."""
    pods = sorted(
        {
            pod
            for pods in MigChangeStep.objects.filter(request=request).values_list("pods", flat=True)
            for pod in pods or []
        }
    )
    owners = dict(
        Namespace.objects.filter(name__in={pod.split("/")[0] for pod in pods}).values_list(
            "name", "team__slug"
        )
    )
    teams: dict[str, list[str]] = {}
    for pod in pods:
        team = owners.get(pod.split("/")[0])
        if team:
            teams.setdefault(team, []).append(pod)
    return teams


def tell_evictions(request: MigChangeRequest) -> None:
    """One ``mig_change.pods_evicted`` event per team whose pods the request evicted."""
    what = "Drain" if request.is_drain else "MIG change"
    for team, pods in evicted_by_team(request).items():
        notify_event(
            "mig_change.pods_evicted",
            f"{what} #{request.pk} evicted {len(pods)} pod{'s' if len(pods) != 1 else ''} "
            f"of team {team}",
            {
                "change_id": request.pk,
                "team": team,
                "nodes": request.nodes,
                "state": request.state,
                "pods": pods,
            },
        )


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
    impact = request.impact
    evicted = [f"{e.namespace}/{e.pod} on {e.node}" for e in impact.evictions if e.team == team]
    # The one redaction rule, for the members of ``team``: their own pods named, others'
    # (the asking team's, a third team's) and their budgets not.
    own = set(Namespace.objects.filter(team__slug=team).values_list("name", flat=True))
    own |= {e.namespace for e in impact.evictions if e.team == team}  # as the assessment saw
    names = PodNames(False, frozenset(own))
    lines = [
        f"{request} ({request.get_state_display().lower()}) affects team {team}.",
        f"Asked by {request.team.slug if request.team else 'the portal'}: {request.reason}",
    ]
    if evicted:
        lines.append("Your pods it evicts: " + "; ".join(evicted) + ".")
    lines.extend(impact.reasons)
    lines = [names.redact(line) for line in lines]
    lines.append(f"Read it: {settings.QM_PUBLIC_URL.rstrip('/')}/changes/{request.pk}/")
    return "\n".join(lines)
