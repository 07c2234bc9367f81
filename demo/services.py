"""Loading the demo scenario (``demo.data``): ``manage.py load_demo`` and the run command.

Idempotent: running it again brings the demo objects back to these values and leaves
everything else alone. Every write goes through the same services as the portal, so the
demo is validated and audited too.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.db import transaction

from cluster import credentials
from cluster.models import Cluster
from cluster.services import save_cluster, settings_cluster
from demo import data
from fleet.models import NodePool
from fleet.services import save_node_pool
from portal.audit import record_audit
from portal.models import AuditEvent, PlatformRole
from portal.selectors import DEMO_LOADED
from queues.models import ClusterQueue, Cohort, LocalQueue, ResourceFlavor
from queues.services import save_cluster_queue, save_cohort, save_local_queue, save_resource_flavor
from tenants.models import Membership, Namespace, PriorityClass, Team
from tenants.services import (
    save_namespace,
    save_priority_class,
    save_team,
    set_namespace_limits,
    set_namespace_quota,
)

SOURCE = data.SOURCE


def _upsert(model: Any, lookup: dict[str, Any], values: dict[str, Any]) -> Any:
    instance = model.objects.filter(**lookup).first() or model(**lookup)
    for key, value in values.items():
        setattr(instance, key, value)
    return instance


@transaction.atomic
def load_demo(inference: data.Endpoint | None = None) -> list[str]:
    """Load (or restore) the demo scenario; return the warnings the seed values raise.

    0. with ``inference`` (the second demo cluster's URL and token), the clusters: the
    settings' one named for training, the inference one registered (or pointed at its new
    address); 1. priority classes; 2. teams with their namespace, quota and limits;
    3. flavors and node pools; 4. the cohort and its ClusterQueues, then LocalQueues;
    5. the logins; 6. the marker that the demo is loaded (the sign-in page lists its
    logins)."""
    if inference is not None:
        _clusters(inference)
    _priority_classes()
    teams, warnings = _teams()
    _flavors_and_pools()
    _queues()
    _users(teams)
    # 6. the marker a sign-in page reads to list the demo logins (where settings allow it),
    # written when it says something new: loading the demo again leaves the log quiet
    # (the logins only: passwords are never audited; the page has the demo's from settings)
    marker = {"logins": [[user.username, user.description] for user in data.USERS]}
    last = AuditEvent.objects.filter(event=DEMO_LOADED).order_by("-time", "-id").first()
    if last is None or last.new != marker:
        record_audit(actor=None, event=DEMO_LOADED, source=SOURCE, new=marker)
    return warnings


def _clusters(inference: data.Endpoint) -> tuple[Cluster, Cluster]:
    """The settings' cluster as the training one, and the inference cluster connected by
    its URL and token (the token stored encrypted, replaced only when it changed)."""
    training = settings_cluster()
    training.display_name, training.purpose = data.TRAINING_CLUSTER
    save_cluster(actor=None, cluster=training, source=SOURCE)
    name, display_name, purpose = data.INFERENCE_CLUSTER
    second = Cluster.objects.filter(name=name).first() or Cluster(name=name)
    second.display_name, second.purpose = display_name, purpose
    second.connection, second.api_url = Cluster.Connection.TOKEN, inference.url
    stored = credentials.decrypt(second.credential, cluster=name) if second.credential else ""
    token = inference.token if inference.token != stored else None
    save_cluster(actor=None, cluster=second, credential=token, source=SOURCE)
    return training, second


def _priority_classes() -> None:
    for name, value, policy, description in data.PRIORITY_CLASSES:
        values = {
            "value": value,
            "preemption_policy": policy,
            "description": description,
            "global_default": False,
        }
        save_priority_class(
            actor=None,
            source=SOURCE,
            priority_class=_upsert(PriorityClass, {"name": name}, values),
        )


def _teams() -> tuple[dict[str, Team], list[str]]:
    """The teams, each with its namespace, quota and limits, and the warnings these raise."""
    teams: dict[str, Team] = {}
    warnings: list[str] = []
    for slug, name, description in data.TEAMS:
        team = save_team(
            actor=None,
            source=SOURCE,
            team=_upsert(Team, {"slug": slug}, {"name": name, "description": description}),
        )
        team.allowed_priority_classes.set(
            PriorityClass.objects.filter(name__in=data.ALLOWED_PRIORITY[slug])
        )
        teams[slug] = team
        namespace = save_namespace(
            actor=None, source=SOURCE, namespace=_upsert(Namespace, {"name": slug}, {"team": team})
        )
        hard = data.SEED_QUOTA if slug == "team-a" else data.OTHER_QUOTAS[slug]
        warnings += set_namespace_quota(actor=None, namespace=namespace, hard=hard, source=SOURCE)
        limits = data.SEED_LIMITS if slug == "team-a" else data.OTHER_LIMITS.get(slug, [])
        warnings += set_namespace_limits(
            actor=None, namespace=namespace, limits=limits, source=SOURCE
        )
    return teams, warnings


def _flavors_and_pools() -> None:
    for name, labels, taints, tolerations, description in data.FLAVORS:
        values = {
            "node_labels": labels,
            "node_taints": taints,
            "tolerations": tolerations,
            "description": description,
        }
        save_resource_flavor(
            actor=None, source=SOURCE, flavor=_upsert(ResourceFlavor, {"name": name}, values)
        )
    for name, selector, purpose, config, description in data.NODE_POOLS:
        values = {
            "node_selector": selector,
            "purpose": purpose,
            "mig_config": config,
            "description": description,
        }
        save_node_pool(actor=None, source=SOURCE, pool=_upsert(NodePool, {"name": name}, values))


def _queues() -> None:
    cohorts: dict[str, Cohort] = {}
    for name, parent, description in data.COHORTS:
        cohort = {"parent": cohorts.get(parent), "description": description}
        cohorts[name] = save_cohort(
            actor=None, source=SOURCE, cohort=_upsert(Cohort, {"name": name}, cohort)
        )
    queues: dict[str, ClusterQueue] = {}
    for name, weight, groups, description in data.CLUSTER_QUEUES:
        values = {
            "cohort": cohorts["ai-platform"],
            "fair_sharing_weight": weight,
            "resource_groups": groups,
            "description": description,
        }
        queues[name] = save_cluster_queue(
            actor=None, source=SOURCE, cluster_queue=_upsert(ClusterQueue, {"name": name}, values)
        )
    for name, namespace, cq in data.LOCAL_QUEUES:
        lookup = {"name": name, "namespace": Namespace.objects.get(name=namespace)}
        save_local_queue(
            actor=None,
            source=SOURCE,
            local_queue=_upsert(LocalQueue, lookup, {"cluster_queue": queues[cq]}),
        )


def _users(teams: dict[str, Team]) -> None:
    user_model = get_user_model()
    for demo in data.USERS:
        user = user_model.objects.filter(username=demo.username).first() or user_model(
            username=demo.username
        )
        user.is_staff = user.is_superuser = demo.superuser
        user.first_name = demo.description
        user.set_password(data.DEMO_PASSWORD)
        user.save()
        for role in demo.roles:
            PlatformRole.objects.get_or_create(user=user, role=role)
        for slug, role in demo.teams:
            Membership.objects.update_or_create(
                user=user, team=teams[slug], defaults={"role": role}
            )
