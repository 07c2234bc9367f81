"""Changes of a cluster's MIG policy (governed per-claim MIG): proposed by a platform admin,
assessed, decided by an approver on a fresh assessment, then written as the policy.

The policy (``tenants.models.MigPolicy``) says whether a cluster's per-claim MIG devices
are governed and how many devices of each profile each namespace may hold
(``tenants/mig_policy.py`` renders it as DeviceClasses and ResourceQuotas, which the API
server enforces). A change's impact is read from the last poll: the claims the new policy
would no longer allow (they keep their devices: a quota refuses new claims, it never evicts)
and the pods waiting for a claim their namespace's quota refused that it would leave room
for. A proposal names the whole policy, so what is approved is exactly what was shown.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

import orjson
from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import IntegrityError, transaction
from django.http import Http404
from django.utils import timezone

from changes.approval import decide_on_fresh, refuse_own, require_decider
from changes.models import MigPolicyChange
from cluster.models import Cluster, ObservedPod, ObservedResourceClaim
from cluster.selectors import mig_profiles_published
from portal.access.permissions import is_platform_admin, sees_every_team, user_id
from portal.access.selectors import teams_seen_by
from portal.audit.record import Event, record_audit
from portal.notifications.send import Audience, notify_event
from portal.vocabulary.errors import DomainError
from queues.dra import kueue_dra
from tenants import mig_policy
from tenants.models import MigGrant, MigPolicy, Namespace
from tenants.selectors import claim_templates_ask
from tenants.services import check_mig_grants, mig_policy_of, set_mig_policy

User = AbstractBaseUser | AnonymousUser
State = MigPolicyChange.State
UNLIMITED = -1  # a class the policy does not hold (not governed)


@dataclass(frozen=True)
class Claim:
    """A claim as the assessment reads it (from ``ObservedResourceClaim``)."""

    namespace: str
    name: str
    allocated: bool
    devices: dict[str, int]  # per device class


@dataclass
class PolicyImpact:
    """What a policy change does to the claims and the waiting pods, per namespace: the
    claims it would no longer allow (``cut``: namespace, claim, class, over by) and the pods
    waiting for a claim that it would leave room for (``could_start``)."""

    cut: list[dict[str, Any]] = field(default_factory=list)
    could_start: list[dict[str, Any]] = field(default_factory=list)
    fingerprint: str = ""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _hard(
    governed: bool, grants: Iterable[Mapping[str, Any]], namespace: str, profiles: set[str]
) -> dict[str, int]:
    """Per class, the devices ``namespace`` may hold under a policy (absent: unlimited)."""
    if not governed:
        return {}
    mine = {g["profile"]: int(g["devices"]) for g in grants if g["namespace"] == namespace}
    hard = {mig_policy.profile_class(p): mine.get(p, 0) for p in profiles | set(mine)}
    hard.setdefault(mig_policy.GENERIC_MIG_CLASS, 0)
    return hard


def assess_policy(
    *,
    before: tuple[bool, list[dict[str, Any]]],
    after: tuple[bool, list[dict[str, Any]]],
    profiles: Iterable[str],
    namespaces: Iterable[str],
    claims: Iterable[Claim],
    waiting: Iterable[tuple[str, str, str]],
    asks: Mapping[tuple[str, str], list[str]] | None = None,
) -> PolicyImpact:
    """Pure: the impact of moving from policy ``before`` to ``after`` (governed, grants) on
    ``claims`` and on the pods ``waiting`` (namespace, pod, template) for a claim not made.
    A namespace's claims of a class are taken oldest first; those beyond the new hard are
    no longer allowed. A waiting pod could start where every class its template asks for
    (``asks``: (namespace, template) -> classes) has room under the new policy and one had
    none under the old; where its template was not read, where any class of its namespace
    has room that it had not."""
    profiles = set(profiles)
    impact = PolicyImpact()
    used: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    by_namespace: dict[str, list[Claim]] = defaultdict(list)
    for claim in claims:
        by_namespace[claim.namespace].append(claim)
    waiting_in: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for namespace, pod, template in sorted(waiting):
        waiting_in[namespace].append((pod, template))
    for namespace in sorted(set(namespaces)):
        old = _hard(*before, namespace, profiles)
        new = _hard(*after, namespace, profiles)
        for claim in by_namespace.get(namespace, []):
            for device_class, count in sorted(claim.devices.items()):
                used[namespace][device_class] += count
                limit = new.get(device_class, UNLIMITED)
                if limit != UNLIMITED and used[namespace][device_class] > limit:
                    impact.cut.append(
                        {
                            "namespace": namespace,
                            "claim": claim.name,
                            "device_class": device_class,
                            "allocated": claim.allocated,
                            "allowed": limit,
                        }
                    )
        opened = sorted(
            c
            for c in {*old, *new}
            if _room(new, used[namespace], c) > 0 and _room(old, used[namespace], c) <= 0
        )
        if not opened:
            continue
        for pod, template in waiting_in.get(namespace, []):
            asked = (asks or {}).get((namespace, template))
            if asked is None:  # its template not read: the namespace's opened classes
                classes = opened
            elif all(_room(new, used[namespace], c) > 0 for c in asked):
                classes = [c for c in asked if c in opened]
            else:
                continue
            if classes:
                impact.could_start.append(
                    {"namespace": namespace, "pod": pod, "template": template, "classes": classes}
                )
    impact.fingerprint = _fingerprint(before, after, impact)
    return impact


def _room(hard: Mapping[str, int], used: Mapping[str, int], device_class: str) -> int:
    limit = hard.get(device_class, UNLIMITED)
    if limit == UNLIMITED:
        return 1_000_000
    return limit - used.get(device_class, 0)


def _fingerprint(before: Any, after: Any, impact: PolicyImpact) -> str:
    text = orjson.dumps(
        [before, after, impact.cut, impact.could_start], option=orjson.OPT_SORT_KEYS
    )
    return hashlib.sha256(text).hexdigest()[:16]


# ------------------------------------------------------------------------- reading the facts


def offered_profiles(cluster: Cluster) -> list[str]:
    """The MIG profiles the cluster's GPUs publish through DRA (the last poll's slices)."""
    return mig_profiles_published(cluster)


def _facts(cluster: Cluster) -> tuple[list[str], list[Claim], list[tuple[str, str, str]]]:
    """The cluster's namespaces, their claims and their pods waiting for an unmade claim."""
    namespaces = list(Namespace.objects.on(cluster).values_list("name", flat=True))
    claims = [
        Claim(ns, name, state == ObservedResourceClaim.State.ALLOCATED, devices)
        for ns, name, state, requests in ObservedResourceClaim.objects.on(cluster)
        .filter(namespace__in=namespaces)
        .order_by("namespace", "created_at", "name")
        .values_list("namespace", "name", "state", "requests")
        if (devices := mig_policy.claim_devices(requests))
    ]
    waiting = [
        (ns, pod, next(c["template"] for c in asked if c.get("template") and not c.get("claim")))
        for ns, pod, asked in ObservedPod.objects.on(cluster)
        .filter(namespace__in=namespaces, phase="Pending")
        .values_list("namespace", "name", "resource_claims")
        if any(c.get("template") and not c.get("claim") for c in asked or ())
    ]
    return namespaces, claims, waiting


def assess(
    cluster: Cluster, governed: bool, grants: list[dict[str, Any]], profiles: list[str]
) -> PolicyImpact:
    namespaces, claims, waiting = _facts(cluster)
    return assess_policy(
        before=mig_policy_of(cluster),
        after=(governed, grants),
        profiles=profiles,
        namespaces=namespaces,
        claims=claims,
        waiting=waiting,
        asks=claim_templates_ask(cluster.pk, sorted({ns for ns, _, _ in waiting})),
    )


# ------------------------------------------------------------------------------- the door


def _notify(event: str, change: MigPolicyChange, *, actor: User) -> None:
    """Tell of ``event`` on commit: those subscribed to requests or decisions, and for a
    decision the proposer. The payload names no namespace or team (a policy change names
    every team's grants; a lead may be subscribed), only the change, its cluster and mode."""
    audience = Audience.of(
        people=[change.requested_by_id] if event != "requested" else [],
        actor=user_id(actor),
    )
    payload = {"id": change.pk, "state": change.state, "governed": change.governed}
    subject = f"MIG policy change #{change.pk} on {change.cluster.name}: {event}"
    on = int(change.cluster_id)  # type: ignore[arg-type]  # a cluster key is never null
    transaction.on_commit(
        lambda: notify_event(f"mig_policy_change.{event}", subject, payload, audience, cluster=on)
    )


def require_policy_admin(user: User) -> None:
    if not is_platform_admin(user):
        raise PermissionDenied("Only platform admins propose changes of a cluster's MIG policy.")


def propose_mig_policy(
    *,
    actor: User,
    cluster: Cluster,
    governed: bool,
    grants: list[dict[str, Any]],
    reason: str,
    source: str = "web",
) -> MigPolicyChange:
    """Propose a cluster's whole MIG policy (governed, each namespace's grants), assessed
    against the last poll. Refused with field errors, writing nothing: grants of a
    namespace the portal does not manage there, of a profile its GPUs do not offer, counts
    that are not whole numbers, no reason, a policy that changes nothing, a second proposal
    while one waits."""
    require_policy_admin(actor)
    offered = offered_profiles(cluster)
    spelled, errors = check_mig_grants(cluster, grants, offered=offered)
    if not reason.strip():
        errors["reason"] = ["Say why the policy changes (the approver reads it)."]
    if errors:
        raise ValidationError(errors)
    current = mig_policy_of(cluster)
    if current == (governed, spelled):
        raise ValidationError({"__all__": ["This is the policy already: nothing to change."]})
    impact = assess(cluster, governed, spelled, offered)
    try:
        with transaction.atomic(durable=True):  # an entry point: never inside another
            change = MigPolicyChange.objects.create(
                cluster=cluster,
                requested_by=actor,  # type: ignore[misc]  # an authenticated admin
                governed=governed,
                grants=spelled,
                previous={"governed": current[0], "grants": current[1], "profiles": offered},
                reason=reason.strip(),
                assessment=impact.to_json(),
            )
            record_audit(
                actor=actor,
                event=Event.MIG_POLICY_CHANGE_REQUESTED,
                source=source,
                target=change,
                old={"governed": current[0], "grants": current[1]},
                new={"governed": governed, "grants": spelled, "reason": reason.strip()},
            )
            _notify("requested", change, actor=actor)
    except IntegrityError:
        raise ValidationError(
            {
                "__all__": [
                    "A change of this cluster's MIG policy is already waiting for a decision."
                ]
            }
        ) from None
    return change


def get_mig_policy_change_for_user(user: User, change_id: int) -> MigPolicyChange:
    """A policy change names every team's grants: platform admins and approvers only
    (anyone else: no such change)."""
    found = list_mig_policy_changes_for_user(user).filter(pk=change_id).first()
    if found is None:
        raise Http404("No such change.")
    return found


def approve_mig_policy_change(
    *, request_id: int, approver: User, comment: str = "", seen: str = "", source: str = "web"
) -> MigPolicyChange:
    """Approve a pending policy change on a fresh assessment and write the policy.

    Nobody approves their own proposal. The policy and the claims are read again (the
    change locked): when the assessment made now differs from the one the approver was
    shown (``seen``; by default the stored one), it is stored and the approval refused, so
    the approver reads it and decides again."""
    change = get_mig_policy_change_for_user(approver, request_id)
    require_decider(approver, "MIG policy changes")
    refuse_own(change, approver, "You cannot approve your own proposal; another approver must.")  # type: ignore[arg-type]
    with transaction.atomic(durable=True):  # an entry point: never inside another
        change = MigPolicyChange.objects.select_for_update().get(pk=change.pk)
        if change.state != State.PENDING:
            raise DomainError("This change was already decided.", code="conflict")
        profiles = list(change.previous.get("profiles") or [])
        there = set(Namespace.objects.on(change.cluster_id).values_list("name", flat=True))
        gone = sorted({g["namespace"] for g in change.grants} - there)
        if gone:
            raise DomainError(
                f"Namespace {', '.join(gone)} was deleted since this was proposed: reject it, "
                "and propose the policy again.",
                code="target_deleted",
            )
        fresh = assess(change.cluster, change.governed, change.grants, profiles)
        shown = seen or str(change.assessment.get("fingerprint", ""))

        def approve() -> None:
            MigPolicyChange.objects.filter(pk=change.pk).update(
                state=State.APPROVED,
                decided_by=approver,
                decided_at=timezone.now(),
                decision_comment=comment,
            )
            set_mig_policy(
                actor=approver,
                cluster=change.cluster,
                governed=change.governed,
                grants=change.grants,
                profiles=profiles,
                source=source,
                serves=change,
            )
            record_audit(
                actor=approver,
                event=Event.MIG_POLICY_CHANGE_APPROVED,
                source=source,
                target=change,
                new={"comment": comment},
            )
            change.state = State.APPROVED
            _notify("approved", change, actor=approver)

        def reassess() -> bool:
            MigPolicyChange.objects.filter(pk=change.pk).update(assessment=fresh.to_json())
            record_audit(
                actor=approver,
                event=Event.MIG_POLICY_CHANGE_REASSESSED,
                source=source,
                target=change,
                old={"fingerprint": shown},
                new={"fingerprint": fresh.fingerprint},
            )
            return True

        refused = decide_on_fresh(
            shown=shown if shown == change.assessment.get("fingerprint") else "",
            fresh=fresh.fingerprint,
            approve=approve,
            reassess=reassess,
        )
    if refused:
        raise DomainError(
            "The policy, the claims or the waiting pods changed since the assessment you "
            "read. The assessment is updated: read it and decide again.",
            code="stale_assessment",
        )
    change.refresh_from_db()
    return change


@transaction.atomic(durable=True)  # an entry point: never inside another
def reject_mig_policy_change(
    *, request_id: int, approver: User, comment: str, source: str = "web"
) -> MigPolicyChange:
    change = get_mig_policy_change_for_user(approver, request_id)
    require_decider(approver, "MIG policy changes")
    refuse_own(change, approver, "You cannot decide your own proposal.")  # type: ignore[arg-type]
    if change.state != State.PENDING:
        raise DomainError("This change was already decided.", code="conflict")
    if not comment.strip():
        raise ValidationError({"comment": ["Say why it is rejected."]})
    if not MigPolicyChange.objects.filter(pk=change.pk, state=State.PENDING).update(
        state=State.REJECTED,
        decided_by=approver,
        decided_at=timezone.now(),
        decision_comment=comment,
    ):
        raise DomainError("This change was already decided.", code="conflict")
    record_audit(
        actor=approver,
        event=Event.MIG_POLICY_CHANGE_REJECTED,
        source=source,
        target=change,
        new={"comment": comment},
    )
    change.refresh_from_db()
    _notify("rejected", change, actor=approver)
    return change


# ------------------------------------------------------------------------------- the reads


@dataclass
class PolicyView:
    """One cluster's MIG policy as a user may read it: its mode, the profiles it keeps a
    class for, and the grants of the namespaces the user may see (every team's for platform
    admins and approvers; their own teams' for anyone else: other teams' names never reach
    a lead)."""

    cluster: Cluster
    governed: bool
    profiles: list[str]
    grants: list[dict[str, Any]]
    pending: MigPolicyChange | None
    offered: list[str] = field(default_factory=list)  # the page's form: what may be granted
    text: str = ""  # the page's form: the grants as lines
    errors: dict[str, list[str]] = field(default_factory=dict)  # the page's form
    unmapped: list[str] = field(default_factory=list)  # classes Kueue charges in no resource

    @property
    def mode(self) -> str:
        if self.governed:
            return (
                "Governed per claim (DRA): claims of MIG devices use the portal's profile "
                "classes within each namespace's grants; every other MIG class is closed."
            )
        return (
            "Not governed: MIG is pre-configured (MIG Manager or the driver's static MIG), "
            "or claims are not held by the portal; MIG changes re-slice nodes as before."
        )


def mig_policies_for_user(user: User) -> list[PolicyView]:
    """Each cluster the user may see with its MIG policy (three queries whatever the size)."""
    every = sees_every_team(user)
    mine = teams_seen_by(user).values("pk")
    clusters = Cluster.objects.defer("credential").order_by("name")
    if not every:
        clusters = clusters.filter(namespaces__team__in=mine).distinct()
    found = list(clusters)
    policies = {
        p.cluster_id: p for p in MigPolicy.objects.on_every_cluster().filter(cluster__in=found)
    }
    grants: dict[int, list[dict[str, Any]]] = defaultdict(list)
    rows = MigGrant.objects.filter(policy__cluster__in=found).order_by("namespace__name", "profile")
    if not every:
        rows = rows.filter(namespace__team__in=mine)
    for cluster_id, namespace, profile, devices in rows.values_list(
        "policy__cluster_id", "namespace__name", "profile", "devices"
    ):
        grants[cluster_id].append({"namespace": namespace, "profile": profile, "devices": devices})
    pending: dict[int, MigPolicyChange] = {}
    if every:
        pending = {
            int(c.cluster_id): c  # type: ignore[arg-type]  # a cluster key is never null
            for c in MigPolicyChange.objects.on_every_cluster().filter(
                cluster__in=found, state=State.PENDING
            )
        }
    return [
        PolicyView(
            cluster=c,
            governed=bool(policies.get(c.pk) and policies[c.pk].governed),
            profiles=list(policies[c.pk].profiles) if c.pk in policies else [],
            grants=grants[c.pk],
            pending=pending.get(c.pk),
        )
        for c in found
    ]


def kueue_unmapped(view: PolicyView) -> list[str]:
    """A governed cluster's profile classes that Kueue, charging DRA claims there, maps to
    no resource: a Kueue workload whose claim asks for one is held as misconfigured
    (``docs/reference/dra.md``). Empty where Kueue's configuration was not read or its DRA
    integration is off (one query)."""
    if not view.governed or not view.profiles:
        return []
    config = kueue_dra(view.cluster.pk)
    if not config.read or not config.enabled:
        return []
    return [
        c
        for c in (mig_policy.profile_class(p) for p in view.profiles)
        if config.resource_of(c) is None
    ]


def list_mig_policy_changes_for_user(user: User) -> Any:
    """The policy changes: for platform admins and approvers (they name every team)."""
    if not sees_every_team(user):
        return MigPolicyChange.objects.none()
    return MigPolicyChange.objects.on_every_cluster().select_related(
        "cluster", "requested_by", "decided_by"
    )
