"""Notifications of MIG change and drain requests (new, decided, succeeded, failed,
rolled back, and the pods they evicted, per team), through the portal's hooks, people's
subscriptions and the people each one concerns (told without subscribing)."""

from __future__ import annotations

from changes.models import MigChangeRequest, MigChangeStep
from cluster.scope import cluster_id_of
from portal.notifications.send import Audience, notify_event
from tenants.models import Namespace

SUBJECTS = {
    "requested": "MIG change #{id} requested: {nodes} -> {config}",
    "approved": "MIG change #{id} approved",
    "rejected": "MIG change #{id} rejected",
    "cancelled": "MIG change #{id} cancelled",
    "succeeded": "MIG change #{id} succeeded",
    "failed": "MIG change #{id} failed",
    "aborted": "MIG change #{id} aborted",
    "rolled_back": "MIG change #{id} rolled back",
}
# The events that end a run: the pods it evicted are told then, to each team they belong to
# (a rollback follows a failure, which told them already).
ENDS = ("succeeded", "failed", "aborted")
# Who is told without subscribing: the person who asked, of the decision and of the end;
# the members of every team the change hits, of the approval and of the end, and (when it
# is not the asking team) of the request and its other decisions too, so a team hears of a
# change against its pods before it runs.
DECIDED = ("approved", "rejected", "cancelled")
ENDED = ("succeeded", "failed", "aborted", "rolled_back")
BEFORE_THE_RUN = ("requested", "approved", "rejected", "cancelled")


def payload(request: MigChangeRequest, event: str = "") -> dict[str, object]:
    """What an event says (before the run, ``evictions``: the pods the assessment names,
    ``impact``: what it does to the queues, in its words)."""
    impact = request.impact if event in BEFORE_THE_RUN else None
    evictions = [f"{e.namespace}/{e.pod} on {e.node}" for e in impact.evictions] if impact else []
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
        "evictions": evictions,
        "impact": list(impact.reasons) if impact else [],
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


def audience(event: str, request: MigChangeRequest, actor: int | None = None) -> Audience:
    """The people ``event`` concerns (see above); ``actor``: who did it, else the decider
    of a decision, the asker of a request."""
    if actor is None:
        actor = {"requested": request.requested_by_id}.get(
            event, request.decided_by_id if event in ("approved", "rejected") else None
        )
    hit = [team.slug for team in request.teams_hit.all()]
    asking = request.team.slug if request.team else None
    if event not in ("approved", *ENDED):
        hit = [slug for slug in hit if slug != asking]
    return Audience.of(
        people=[request.requested_by_id] if event in (*DECIDED, *ENDED) else [],
        teams=hit,
        actor=actor,
    )


def notify(event: str, request: MigChangeRequest, *, actor: int | None = None) -> None:
    notify_event(
        f"mig_change.{event}",
        subject(event, request),
        payload(request, event),
        audience(event, request, actor),
        cluster=cluster_id_of(request.cluster_id),
    )
    if event in ENDS:
        tell_evictions(request)


def evicted_by_team(request: MigChangeRequest) -> dict[str, list[str]]:
    """The pods (``namespace/name``) the request's steps evicted, by the team owning their
    namespace on the request's cluster (two queries: a namespace of the same name on another
    cluster may be another team's)."""
    pods = sorted(
        {
            pod
            for pods in MigChangeStep.objects.filter(request=request).values_list("pods", flat=True)
            for pod in pods or []
        }
    )
    owners = dict(
        Namespace.objects.on(request.cluster_id)
        .filter(name__in={pod.split("/")[0] for pod in pods})
        .values_list("name", "team__slug")
    )
    teams: dict[str, list[str]] = {}
    for pod in pods:
        team = owners.get(pod.split("/")[0])
        if team:
            teams.setdefault(team, []).append(pod)
    return teams


def tell_evictions(request: MigChangeRequest) -> None:
    """One ``mig_change.pods_evicted`` event per team whose pods the request evicted, told
    to that team's members without subscribing."""
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
            Audience.of(teams=[team]),
            cluster=cluster_id_of(request.cluster_id),
        )
