"""Writes to tenants: each validates with field errors, audits, and changes nothing on error."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import models, transaction
from django.utils import timezone

from cluster.selectors import device_class_ceilings
from fleet.capacity import fleet_capacity
from portal import desired, removal
from portal.access.permissions import is_platform_admin
from portal.audit.record import Event, System, admin_event, record_audit
from portal.removal import delete_desired
from portal.services import Actor, require_platform_admin, save_validated
from portal.vocabulary.errors import DomainError
from portal.vocabulary.quantity import parse_quantity
from tenants import mig_policy
from tenants.models import (
    LimitRangeItem,
    Membership,
    MigGrant,
    MigPolicy,
    Namespace,
    PriorityClass,
    QuotaItem,
    Team,
)
from tenants.rules import (
    DEVICE_CLASS_QUOTA,
    LimitSpec,
    check_limit,
    check_quota_item,
    limit_range_pitfalls,
    queue_coverage_notes,
    spelled_quantity,
)
from tenants.selectors import namespace_etag


@transaction.atomic
def save_team(
    *,
    actor: Actor,
    team: Team,
    source: str,
    allowed_priority_classes: Iterable[PriorityClass] | None = None,
) -> Team:
    """Create or update a team and, when given, the PriorityClasses its workloads may use
    (a change of those is audited on its own: the team's row does not hold them)."""
    require_platform_admin(actor)
    created = team.pk is None
    before = [] if created else sorted(team.allowed_priority_classes.values_list("name", flat=True))
    classes = None if allowed_priority_classes is None else list(allowed_priority_classes)
    after = before if classes is None else sorted(pc.name for pc in classes)
    save_validated(
        team,
        actor=actor,
        source=source,
        team=team,
        event=Event.TEAM_CREATED if created else Event.TEAM_CHANGED,
        # The team's row is saved before its classes are set: its audit row says the
        # classes it gets, not the empty (or previous) set the row alone would show.
        noted={"allowed_priority_classes": after},
    )
    if classes is None:
        return team
    if after != before:
        team.allowed_priority_classes.set(classes)
        record_audit(
            actor=actor,
            event=Event.TEAM_PRIORITY_CLASSES_CHANGED,
            source=source,
            target=team,
            team=team,
            old={"allowed_priority_classes": before},
            new={"allowed_priority_classes": after},
        )
    return team


@transaction.atomic
def save_membership(*, actor: Actor, membership: Membership, source: str) -> Membership:
    """Add a person to a team, or change their role there (platform admins; single sign-on
    keeps the memberships its groups grant itself, ``tenants.oidc``)."""
    require_platform_admin(actor)
    created = membership.pk is None
    save_validated(
        membership,
        actor=actor,
        source=source,
        team=membership.team,
        event=Event.MEMBERSHIP_CREATED if created else Event.MEMBERSHIP_CHANGED,
    )
    return membership


def require_team_lead(actor: Actor, team: Team) -> None:
    """Platform admins and the system may; otherwise only a lead of ``team``."""
    if isinstance(actor, System) or is_platform_admin(actor):
        return
    if not (
        actor.is_authenticated
        and Membership.objects.filter(
            team=team, user_id=actor.pk, role=Membership.Role.LEAD
        ).exists()
    ):
        raise PermissionDenied(
            "Only a lead of this team or a platform admin can change its members."
        )


def _keeps_a_lead(team: Team, *, without: Membership) -> bool:
    return (
        Membership.objects.filter(team=team, role=Membership.Role.LEAD)
        .exclude(pk=without.pk)
        .exists()
    )


@transaction.atomic(durable=True)  # an entry point: never inside another
def set_team_member(
    *, actor: Actor, team: Team, username: str, role: str, source: str
) -> Membership:
    """Add a person to a team or change their role there: a lead of the team, or a platform
    admin. Team roles only (lead, member, viewer: platform roles are granted elsewhere);
    the last lead stays a lead; memberships single sign-on grants follow the IdP. The
    members page's and the API's entry point: a service writing a larger story in its own
    transaction (the onboarding) calls :func:`set_team_member_nested`."""
    return set_team_member_nested(
        actor=actor, team=team, username=username, role=role, source=source
    )


@transaction.atomic
def set_team_member_nested(
    *, actor: Actor, team: Team, username: str, role: str, source: str
) -> Membership:
    """:func:`set_team_member` inside the caller's transaction."""
    require_team_lead(actor, team)
    user = get_user_model().objects.filter(username=username.strip()).first()
    errors = {}
    if user is None:
        errors["username"] = [f"No user named {username.strip()!r}."]
    if role not in Membership.Role.values:
        errors["role"] = ["Choose lead, member or viewer."]
    if errors or user is None:
        raise ValidationError(errors)
    membership = Membership.objects.select_for_update().filter(
        team=team, user=user
    ).first() or Membership(team=team, user=user)
    if membership.pk is not None and membership.granted_by == "sso":
        raise ValidationError(
            {"username": ["Single sign-on grants this membership: change it in the IdP's groups."]}
        )
    if (
        membership.role == Membership.Role.LEAD
        and role != Membership.Role.LEAD
        and not _keeps_a_lead(team, without=membership)
    ):
        raise ValidationError(
            {"role": ["This is the team's last lead: make someone else lead first."]}
        )
    membership.role = role
    save_validated(
        membership,
        actor=actor,
        source=source,
        team=team,
        event=Event.MEMBERSHIP_CREATED if membership.pk is None else Event.MEMBERSHIP_CHANGED,
    )
    return membership


@transaction.atomic(durable=True)  # an entry point: never inside another
def remove_team_member(*, actor: Actor, membership_id: int, team: Team, source: str) -> None:
    """Take a person out of a team: a lead of the team, or a platform admin; never the last
    lead, never a membership single sign-on grants."""
    require_team_lead(actor, team)
    membership = Membership.objects.select_for_update().filter(pk=membership_id, team=team).first()
    if membership is None:
        raise DomainError("This person is no longer in the team.", code="gone")
    if membership.granted_by == "sso":
        raise DomainError("Single sign-on grants this membership: change it in the IdP's groups.")
    if membership.role == Membership.Role.LEAD and not _keeps_a_lead(team, without=membership):
        raise DomainError("This is the team's last lead: make someone else lead first.")
    record_audit(
        actor=actor,
        event=Event.MEMBERSHIP_REVOKED,
        source=source,
        target=membership,
        team=team,
        old={"user": membership.user.get_username(), "role": membership.role},
    )
    membership.delete()


@transaction.atomic
def delete_tenant_object(
    *, actor: Actor, obj: Team | Membership | PriorityClass, source: str
) -> None:
    """Delete a team, a membership or a PriorityClass of the catalog (platform admins),
    audited; the loop removes what the portal applied for it. A team that still has
    namespaces keeps them: the database refuses, and nothing changes (a namespace is
    deleted on its own, confirmed, :func:`delete_namespace_confirmed`)."""
    require_platform_admin(actor)
    team = obj if isinstance(obj, Team) else getattr(obj, "team", None)
    delete_desired(
        obj,
        actor=actor,
        source=source,
        event=admin_event(str(obj._meta.model_name), "deleted"),
        team=team,
    )


@transaction.atomic
def save_namespace(*, actor: Actor, namespace: Namespace, source: str) -> Namespace:
    """Create or update a namespace of a team."""
    require_platform_admin(actor)
    created = namespace.pk is None
    save_validated(
        namespace,
        actor=actor,
        source=source,
        team=namespace.team,
        event=Event.NAMESPACE_CREATED if created else Event.NAMESPACE_CHANGED,
    )
    return namespace


@transaction.atomic
def save_priority_class(
    *,
    actor: Actor,
    priority_class: PriorityClass,
    source: str,
    clusters: Iterable[Any] | None = None,
) -> PriorityClass:
    """Create or update a PriorityClass of the platform catalog and, when given, the
    clusters it is applied to (none: every cluster; a change of those audited on its own,
    as the row does not hold them)."""
    require_platform_admin(actor)
    save_validated(priority_class, actor=actor, source=source, event=Event.PRIORITY_CLASS_SAVED)
    if clusters is None:
        return priority_class
    before = sorted(priority_class.clusters.values_list("name", flat=True))
    chosen = list(clusters)
    after = sorted(str(getattr(c, "name", c)) for c in chosen)
    if after != before:
        priority_class.clusters.set(chosen)
        desired.changed(priority_class)
        record_audit(
            actor=actor,
            event=Event.PRIORITY_CLASS_CLUSTERS_CHANGED,
            source=source,
            target=priority_class,
            old={"clusters": before},
            new={"clusters": after},
        )
    return priority_class


@transaction.atomic
def _queues_covering(namespace: Namespace) -> dict[str, list[str]]:
    """The ClusterQueues behind the namespace's LocalQueues and the resources each covers
    (read through the LocalQueues' relation: tenants sit below queues)."""
    return {
        lq.cluster_queue.name: [
            str(r)
            for group in lq.cluster_queue.resource_groups or []
            for r in group.get("coveredResources") or []
        ]
        for lq in namespace.local_queues.select_related("cluster_queue")
    }


def set_namespace_quota(
    *,
    actor: Actor,
    namespace: Namespace,
    hard: dict[str, str],
    source: str,
    override_reason: str = "",
    serves: models.Model | None = None,
) -> list[str]:
    """Replace a namespace's ResourceQuota ``hard`` items; return warnings to show.

    Errors are keyed ``hard[<resource>]`` like the API server's ``spec.hard[...]`` and
    nothing is written when any item is refused. Values are stored in one spelling (device
    and object counts as plain integers). Raising a GPU quota above what the fleet could
    ever offer needs ``override_reason`` (recorded with the change). ``serves``: the
    approved request this write carries out, whose decision already checked who decides
    and the fleet's ceiling (its audit row names it).
    """
    if serves is None:
        require_platform_admin(actor)
    errors: dict[str, list[str]] = {}
    warnings: list[str] = []
    for resource, value in hard.items():
        check = check_quota_item(resource, str(value))
        if check.errors:
            errors[f"hard[{resource}]"] = check.errors
        warnings.extend(check.warnings)
    if errors:
        raise ValidationError(errors)
    warnings.extend(queue_coverage_notes(hard, _queues_covering(namespace)))
    hard = {resource: spelled_quantity(resource, str(value)) for resource, value in hard.items()}
    old = dict(namespace.quota_items.values_list("resource", "hard"))
    if old == hard:
        return warnings  # nothing changed: nothing to apply or audit
    beyond = (
        {} if serves is not None else _beyond_the_fleet(old, hard, cluster_id=namespace.cluster_id)
    )
    if beyond and not override_reason.strip():
        raise ValidationError(beyond)
    namespace.quota_items.exclude(resource__in=list(hard)).delete()
    for resource, value in hard.items():
        QuotaItem.objects.update_or_create(
            namespace=namespace, resource=resource, defaults={"hard": value}
        )
    desired.changed(namespace)
    record_audit(
        actor=actor,
        event=Event.QUOTA_CHANGED,
        source=source,
        target=namespace,
        team=namespace.team,
        old=old,
        new={**hard, **({"override_reason": override_reason.strip()} if beyond else {})},
        cause=serves,
    )
    return warnings


def _beyond_the_devices(
    old: dict[str, str], hard: dict[str, str], *, cluster_id: int | None
) -> dict[str, list[str]]:
    """Raised quotas on DRA device classes above what the cluster's published devices could
    give at once, as field errors."""
    raised = {
        found["device_class"]: (resource, value)
        for resource, value in hard.items()
        if (found := DEVICE_CLASS_QUOTA.match(resource))
        and (resource not in old or parse_quantity(value) > parse_quantity(old[resource]))
    }
    if not raised or cluster_id is None:
        return {}
    most = device_class_ceilings(cluster_id, list(raised))
    return {
        f"hard[{resource}]": [
            f"{value} is more than the cluster's DRA devices of class {name} could ever give "
            f"at once ({most[name]}): give an override reason to set it anyway."
        ]
        for name, (resource, value) in raised.items()
        if name in most and parse_quantity(value) > most[name]
    }


def _beyond_the_fleet(
    old: dict[str, str], hard: dict[str, str], *, cluster_id: int | None
) -> dict[str, list[str]]:
    """Raised GPU quota items above what the namespace's cluster could ever offer, as field
    errors (DRA device classes: ``_beyond_the_devices``)."""
    errors = _beyond_the_devices(old, hard, cluster_id=cluster_id)
    raised = {
        resource: value
        for resource, value in hard.items()
        if resource.startswith("requests.nvidia.com/")
        and (resource not in old or parse_quantity(value) > parse_quantity(old[resource]))
    }
    if not raised:
        return errors
    capacity = fleet_capacity((r.removeprefix("requests.") for r in raised), cluster_id, flavors=())
    if not capacity.known:
        return errors
    for resource, value in raised.items():
        most = capacity.ceiling.get(resource.removeprefix("requests."), 0)
        if parse_quantity(value) > most:
            errors[f"hard[{resource}]"] = [
                f"{value} is more than the fleet could ever offer ({most} in its best MIG "
                "layout): give an override reason to set it anyway."
            ]
    return errors


def _by_type_and_resource(specs: Iterable[dict[str, str]]) -> list[dict[str, str]]:
    return sorted(specs, key=lambda spec: (spec["limit_type"], spec["resource"]))


@transaction.atomic
def set_namespace_limits(
    *, actor: Actor, namespace: Namespace, limits: list[LimitSpec], source: str
) -> list[str]:
    """Replace a namespace's LimitRange items; return warnings to show."""
    require_platform_admin(actor)
    errors: dict[str, list[str]] = {}
    warnings: list[str] = []
    seen: set[tuple[str, str]] = set()
    for spec in limits:
        key = f"limits[{spec.limit_type}][{spec.resource}]"
        check = check_limit(spec)
        if (spec.limit_type, spec.resource) in seen:
            check.errors.append("resource: listed twice for the same type")
        seen.add((spec.limit_type, spec.resource))
        if check.errors:
            errors[key] = check.errors
        warnings.extend(check.warnings)
    if errors:
        raise ValidationError(errors)
    warnings.extend(limit_range_pitfalls(limits))
    old = [item.spec().__dict__ for item in namespace.limit_items.all()]
    if _by_type_and_resource(old) == _by_type_and_resource(spec.__dict__ for spec in limits):
        return warnings  # nothing changed: nothing to apply or audit
    namespace.limit_items.all().delete()
    LimitRangeItem.objects.bulk_create(
        LimitRangeItem(namespace=namespace, **spec.__dict__) for spec in limits
    )
    desired.changed(namespace)
    record_audit(
        actor=actor,
        event=Event.LIMITS_CHANGED,
        source=source,
        target=namespace,
        team=namespace.team,
        old=old,
        new=[spec.__dict__ for spec in limits],
    )
    return warnings


@transaction.atomic
def delete_namespace(*, actor: Actor, namespace: Namespace, source: str) -> None:
    """Remove a namespace from the portal; the applier removes the portal's objects in it
    from the cluster (and the namespace itself only if the portal created it). Requests
    about it stay, under its name; the pending ones are cancelled first (``portal.removal``)."""
    require_platform_admin(actor)
    removal.removing(namespace, actor=actor, source=source)
    record_audit(
        actor=actor,
        event=Event.NAMESPACE_DELETED,
        source=source,
        target=namespace,
        team=namespace.team,
        old={"name": namespace.name, "team": namespace.team.slug},
    )
    namespace.delete()
    desired.changed(namespace)


@transaction.atomic(durable=True)  # an entry point: never inside another
def delete_namespace_confirmed(
    *, actor: Actor, namespace_id: int, typed_name: str, version: str, source: str
) -> Namespace:
    """Delete a namespace from a confirmation page: the person typed its name, and it is
    still the version the page showed (else nothing changes: a ``confirm_name`` field
    error, or a ``DomainError`` to read the page again). Returns the deleted namespace."""
    require_platform_admin(actor)
    namespace = Namespace.objects.select_for_update().filter(pk=namespace_id).first()
    if namespace is None:
        raise DomainError("This namespace was deleted already.", code="gone")
    if typed_name.strip() != namespace.name:
        raise ValidationError(
            {"confirm_name": [f"Type the namespace's name, {namespace.name}, to delete it."]}
        )
    if version != namespace_etag(namespace):
        raise DomainError(
            "The namespace changed since this page was opened (its quota, limits or team): "
            "read what the delete does now and confirm again.",
            code="precondition_failed",
        )
    delete_namespace(actor=actor, namespace=namespace, source=source)
    return namespace


def mig_policy_of(cluster: Any) -> tuple[bool, list[dict[str, Any]]]:
    """A cluster's MIG policy as stored now: governed, and its grants (namespace, profile,
    devices), sorted; not governed and none where there is no policy yet."""
    policy = MigPolicy.objects.on(cluster).first()
    if policy is None:
        return False, []
    grants = [
        {"namespace": ns, "profile": profile, "devices": devices}
        for ns, profile, devices in policy.grants.values_list(
            "namespace__name", "profile", "devices"
        ).order_by("namespace__name", "profile")
    ]
    return policy.governed, grants


def check_mig_grants(
    cluster: Any, grants: Iterable[dict[str, Any]], *, offered: Iterable[str]
) -> tuple[list[dict[str, Any]], dict[str, list[str]]]:
    """The grants spelled one way (sorted, namespace, profile, devices), and field errors
    keyed ``grants[<i>].<field>``: a namespace the portal does not manage on ``cluster``, a
    profile that is not a MIG profile or that the cluster's GPUs do not offer (``offered``),
    a count that is not a whole number, a namespace and profile granted twice."""
    namespaces = set(Namespace.objects.on(cluster).values_list("name", flat=True))
    offered = set(offered)
    errors: dict[str, list[str]] = {}
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for i, grant in enumerate(grants):
        name = str(grant.get("namespace", "")).strip()
        profile = str(grant.get("profile", "")).strip()
        if name not in namespaces:
            errors[f"grants[{i}].namespace"] = [
                f"The portal manages no namespace {name!r} on this cluster."
            ]
        if not mig_policy.PROFILE.match(profile):
            errors[f"grants[{i}].profile"] = [
                f"{profile!r} is not a MIG profile (such as 3g.40gb or 1g.10gb+me)."
            ]
        elif profile not in offered:
            have = ", ".join(sorted(offered)) or "none"
            errors[f"grants[{i}].profile"] = [
                f"The cluster's GPUs publish no MIG device of profile {profile} through DRA "
                f"(they offer: {have})."
            ]
        try:
            devices = int(str(grant.get("devices", "")).strip())
        except ValueError:
            devices = -1
        if devices < 0:
            errors[f"grants[{i}].devices"] = ["A whole number of devices, 0 or more."]
        if (name, profile) in out:
            errors[f"grants[{i}].profile"] = [f"{name} is granted {profile} twice."]
        out[(name, profile)] = {"namespace": name, "profile": profile, "devices": devices}
    return [out[k] for k in sorted(out)], errors


def set_mig_policy(
    *,
    actor: Actor,
    cluster: Any,
    governed: bool,
    grants: list[dict[str, Any]],
    profiles: Iterable[str],
    source: str,
    serves: models.Model,
) -> None:
    """Write a cluster's MIG policy as an approved change (``serves``) decided it: whether
    it is governed, its grants, the profiles whose DeviceClasses it keeps. Only the
    approval of a policy change calls this (it checked who decides and the grants); the
    loop applies the classes and quotas it renders."""
    policy, _ = MigPolicy.objects.get_or_create(cluster=cluster)
    old = mig_policy_of(cluster)
    by_name = {ns.name: ns for ns in Namespace.objects.on(cluster)}
    policy.governed = governed
    policy.profiles = sorted(set(profiles) | {g["profile"] for g in grants})
    policy.changed_at = timezone.now()
    policy.save()
    policy.grants.all().delete()
    MigGrant.objects.bulk_create(
        MigGrant(
            policy=policy,
            namespace=by_name[g["namespace"]],
            profile=g["profile"],
            devices=g["devices"],
        )
        for g in grants
        if g["namespace"] in by_name
    )
    desired.changed(policy)
    record_audit(
        actor=actor,
        event=Event.MIG_POLICY_SET,
        source=source,
        target=policy,
        old={"governed": old[0], "grants": old[1]},
        new={"governed": governed, "grants": grants},
        cause=serves,
    )
