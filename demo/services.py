"""Loading the demo scenario (``demo.data``): ``manage.py load_demo`` and the run command.

Idempotent: running it again brings the demo objects back to these values and leaves
everything else alone. Every write goes through the same services as the portal, so the
demo is validated and audited too.
"""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django.contrib.auth import get_user_model
from django.db import transaction

from budgets.models import Budget
from budgets.selectors import standings
from budgets.services import save_budget
from changes.mig_policy import approve_mig_policy_change, offered_profiles, propose_mig_policy
from changes.models import MigPolicyChange
from cluster import credentials
from cluster.models import Cluster
from cluster.services import save_cluster, settings_cluster
from costs.models import Price
from costs.services import save_price
from demo import data
from fleet.models import NodePool
from fleet.services import save_node_pool
from portal.access.roles import grant_platform_role
from portal.access.selectors import DEMO_LOADED
from portal.audit.record import SYSTEM, record_audit
from portal.models import AuditEvent, PlatformRole
from portal.services import move_to_cluster
from queues.models import ClusterQueue, Cohort, LocalQueue, ResourceFlavor
from queues.services import save_cluster_queue, save_cohort, save_local_queue, save_resource_flavor
from tenants.models import Membership, MigPolicy, Namespace, PriorityClass, Team
from tenants.services import (
    save_membership,
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


@dataclass(frozen=True)
class Clusters:
    """Where the demo's objects go: the settings' cluster, and the inference one when it is
    registered (else everything stays on the settings' cluster, as with one cluster)."""

    training: Cluster
    inference: Cluster | None

    def of(self, on_inference: bool) -> Cluster:
        return self.inference if on_inference and self.inference else self.training


def _placed(model: Any, lookup: dict[str, Any], cluster: Cluster, clusters: Clusters) -> Any:
    """The row named by ``lookup`` on ``cluster``; one the settings' cluster held before the
    second cluster was registered is moved over (its history kept), else a new row."""
    found = model.objects.filter(**lookup, cluster=cluster).first()
    if found is None and cluster != clusters.training:
        found = model.objects.filter(**lookup, cluster=clusters.training).first()
        if found is not None:  # a move is no edit: the services refuse it, this says it
            team = getattr(found, "team", None)
            move_to_cluster(found, cluster=cluster, actor=SYSTEM, source=SOURCE, team=team)
    instance = found or model(**lookup)
    instance.cluster = cluster
    return instance


@transaction.atomic
def load_demo(inference: data.Endpoint | None = None) -> list[str]:
    """Load (or restore) the demo scenario; return the warnings the seed values raise.

    0. the clusters: with ``inference`` (the second demo cluster's URL and token), the
    settings' one named for training and the inference one registered (or pointed at its
    new address); 1. priority classes; 2. teams with their namespaces, quota and limits;
    3. flavors and node pools; 4. the cohorts and ClusterQueues, then LocalQueues;
    5. the logins, the prices of GPU time and the budgets; 6. the marker that the demo is
    loaded (the sign-in page lists its logins). Once the inference cluster is registered, its
    objects live there (team-infer's namespace and queues, team-a-serve, the inference fleet's
    flavors and pools)."""
    clusters = _clusters(inference)
    _priority_classes()
    teams, warnings = _teams(clusters)
    _flavors_and_pools(clusters)
    _queues(clusters)
    _users(teams)
    _prices()
    load_demo_budgets()
    # 6. the marker a sign-in page reads to list the demo logins (where settings allow it),
    # written when it says something new: loading the demo again leaves the log quiet
    # (the logins only: passwords are never audited; the page has the demo's from settings)
    marker = {"logins": [[user.username, user.description] for user in data.USERS]}
    last = AuditEvent.objects.filter(event=DEMO_LOADED).order_by("-time", "-id").first()
    if last is None or last.new != marker:
        record_audit(actor=SYSTEM, event=DEMO_LOADED, source=SOURCE, new=marker)
    return warnings


def _clusters(inference: data.Endpoint | None) -> Clusters:
    """The settings' cluster as the training one, and the inference cluster connected by
    its URL and token (the token stored encrypted, replaced only when it changed); without
    ``inference``, the inference cluster an earlier load registered, if any."""
    name, display_name, purpose = data.INFERENCE_CLUSTER
    second = Cluster.objects.filter(name=name).first()
    training = settings_cluster()
    if inference is None:
        return Clusters(training, second)
    training.display_name, training.purpose = data.TRAINING_CLUSTER
    save_cluster(actor=SYSTEM, cluster=training, source=SOURCE)
    second = second or Cluster(name=name)
    moved = (second.connection, second.api_url) != (Cluster.Connection.TOKEN, inference.url)
    second.display_name, second.purpose = display_name, purpose
    second.connection, second.api_url = Cluster.Connection.TOKEN, inference.url
    stored = credentials.decrypt(second.credential, cluster=name) if second.credential else ""
    # A token is bound to its endpoint: a demo cluster on another port gets it again.
    token = inference.token if inference.token != stored or moved else None
    save_cluster(actor=SYSTEM, cluster=second, credential=token, source=SOURCE)
    return Clusters(training, second)


def _priority_classes() -> None:
    """The platform's classes, applied to every cluster (none named)."""
    for name, value, policy, description in data.PRIORITY_CLASSES:
        values = {
            "value": value,
            "preemption_policy": policy,
            "description": description,
            "global_default": False,
        }
        save_priority_class(
            actor=SYSTEM,
            source=SOURCE,
            priority_class=_upsert(PriorityClass, {"name": name}, values),
        )


def _teams(clusters: Clusters) -> tuple[dict[str, Team], list[str]]:
    """The teams, each with its namespaces, quota and limits, and the warnings these raise."""
    teams: dict[str, Team] = {}
    warnings: list[str] = []
    for slug, name, description in data.TEAMS:
        team = save_team(
            actor=SYSTEM,
            source=SOURCE,
            team=_upsert(Team, {"slug": slug}, {"name": name, "description": description}),
            allowed_priority_classes=PriorityClass.objects.filter(
                name__in=data.ALLOWED_PRIORITY[slug]
            ),
        )
        teams[slug] = team
    served = dict(data.INFERENCE_NAMESPACES) if clusters.inference else {}
    for slug in [slug for slug, _, _ in data.TEAMS if slug not in served] + list(served):
        team = teams[served.get(slug, slug)]
        cluster = clusters.of(slug in served)
        namespace = _placed(Namespace, {"name": slug}, cluster, clusters)
        namespace.team = team
        namespace = save_namespace(actor=SYSTEM, source=SOURCE, namespace=namespace)
        if slug in served:
            hard = data.INFERENCE_QUOTAS[slug]
        else:
            hard = data.SEED_QUOTA if slug == "team-a" else data.OTHER_QUOTAS[slug]
        warnings += set_namespace_quota(actor=SYSTEM, namespace=namespace, hard=hard, source=SOURCE)
        limits = data.SEED_LIMITS if slug == "team-a" else data.OTHER_LIMITS.get(slug, [])
        warnings += set_namespace_limits(
            actor=SYSTEM, namespace=namespace, limits=limits, source=SOURCE
        )
    return teams, warnings


def _flavors_and_pools(clusters: Clusters) -> None:
    flavors = [(clusters.training, f) for f in data.FLAVORS]
    pools = [(clusters.training, p) for p in data.NODE_POOLS]
    if clusters.inference:
        flavors += [(clusters.inference, f) for f in data.INFERENCE_FLAVORS]
        pools += [(clusters.inference, p) for p in data.INFERENCE_POOLS]
    for cluster, (name, labels, taints, tolerations, description) in flavors:
        values = {
            "node_labels": labels,
            "node_taints": taints,
            "tolerations": tolerations,
            "description": description,
        }
        flavor = _upsert(ResourceFlavor, {"name": name, "cluster": cluster}, values)
        save_resource_flavor(actor=SYSTEM, source=SOURCE, flavor=flavor)
    for cluster, (name, selector, purpose, config, description) in pools:
        threshold, minutes = data.IDLE_SETTINGS.get(name, (5, 120))
        pool_values: dict[str, Any] = {
            "node_selector": selector,
            "purpose": purpose,
            "mig_config": config,
            "description": description,
            "idle_threshold_percent": threshold,
            "idle_period_minutes": minutes,
        }
        pool = _upsert(NodePool, {"name": name, "cluster": cluster}, pool_values)
        save_node_pool(actor=SYSTEM, source=SOURCE, pool=pool)


def _cohorts(cluster: Cluster) -> dict[str, Cohort]:
    cohorts: dict[str, Cohort] = {}
    for name, parent, description in data.COHORTS:
        values = {"parent": cohorts.get(parent), "description": description}
        cohort = _upsert(Cohort, {"name": name, "cluster": cluster}, values)
        cohorts[name] = save_cohort(actor=SYSTEM, source=SOURCE, cohort=cohort)
    return cohorts


def _queues(clusters: Clusters) -> None:
    """The cohorts and their ClusterQueues on the settings' cluster; with the inference
    cluster, cq-infer there (moved over, in no cohort: it is alone) and its LocalQueues."""
    training, second = clusters.training, clusters.inference
    parent: Cohort | None = _cohorts(training)["ai-platform"]
    moved = {q[0] for q in data.INFERENCE_CLUSTER_QUEUES} if second else set()
    rows = [(training, parent, q) for q in data.CLUSTER_QUEUES if q[0] not in moved]
    local = [(training, q) for q in data.LOCAL_QUEUES if q[2] not in moved]
    if second:
        rows += [(second, None, q) for q in data.INFERENCE_CLUSTER_QUEUES]
        local += [(second, q) for q in data.INFERENCE_LOCAL_QUEUES]
    queues: dict[str, ClusterQueue] = {}
    for cluster, cohort, (name, weight, groups, description) in rows:
        cq = _placed(ClusterQueue, {"name": name}, cluster, clusters)
        cq.cohort, cq.fair_sharing_weight = cohort, weight
        cq.resource_groups, cq.description = groups, description
        queues[name] = save_cluster_queue(actor=SYSTEM, source=SOURCE, cluster_queue=cq)
    for cluster, (name, namespace, cq_name) in local:
        lookup = {"name": name, "namespace": Namespace.objects.get(name=namespace, cluster=cluster)}
        save_local_queue(
            actor=SYSTEM,
            source=SOURCE,
            local_queue=_upsert(LocalQueue, lookup, {"cluster_queue": queues[cq_name]}),
        )


def _prices() -> None:
    """The demo GPU models' prices, through the costs service (unchanged ones: no audit)."""
    since = dt.date.fromisoformat(data.PRICES_FROM)
    for model, profile, per_hour, note in data.PRICES:
        lookup = {"gpu_model": model, "profile": profile, "effective_from": since}
        price = _upsert(Price, lookup, {"per_hour": Decimal(per_hour), "note": note})
        save_price(actor=SYSTEM, price=price, source=SOURCE)


def _users(teams: dict[str, Team]) -> None:
    user_model = get_user_model()
    for demo in data.USERS:
        user = user_model.objects.filter(username=demo.username).first() or user_model(
            username=demo.username
        )
        user.is_staff = user.is_superuser = demo.superuser
        user.first_name = demo.description
        user.email = demo.email
        user.set_password(data.DEMO_PASSWORD)
        user.save()
        for role in demo.roles:
            if not PlatformRole.objects.filter(user=user, role=role).exists():
                grant_platform_role(actor=SYSTEM, user=user, role=role, source=SOURCE)
        for slug, role in demo.teams:
            membership = Membership.objects.filter(user=user, team=teams[slug]).first()
            membership = membership or Membership(user=user, team=teams[slug])
            membership.role = role
            save_membership(actor=SYSTEM, membership=membership, source=SOURCE)


def load_demo_budgets() -> None:
    """The demo's budgets, through the budgets' service: each team's amount is what it has
    used this month so far over the share ``data.BUDGETS`` gives it (team-a's nearly spent),
    or the fixed amount while there is no usage history yet (``dev.py run`` sets them again
    once the history is backfilled)."""
    for slug, share, fallback, enforce in data.BUDGETS:
        team = Team.objects.filter(slug=slug).first()
        if team is None:
            continue
        budget = Budget.objects.filter(team=team).first() or Budget(team=team)
        budget.unit, budget.period, budget.enforce = Budget.Unit.GPU_HOURS, "monthly", enforce
        budget.amount = budget.amount or Decimal(fallback)
        spent = standings([budget])[budget.pk].spent if budget.pk else 0.0
        if spent > 0:
            budget.amount = Decimal(math.ceil(spent / share))
        save_budget(actor=SYSTEM, budget=budget, source=SOURCE)


def load_demo_mig_policy() -> str:
    """The inference cluster's MIG policy (``data.MIG_POLICY_GRANTS``, governed) through the
    one door of a policy change: the demo's platform admin proposes it and its approver
    approves it on the assessment (the page and the audit name both). Once the cluster's
    DRA GPUs are polled: the grants are checked against the profiles they publish, so
    ``dev.py run`` calls it after the first sync. Left alone where there is no inference
    cluster, no MIG device published yet, a policy already (the demo does not undo a
    change made since) or a change of it waiting. Says what it did."""
    cluster = Cluster.objects.filter(name=data.INFERENCE_CLUSTER[0]).first()
    if cluster is None:
        return "No inference cluster: no MIG policy to seed."
    if (
        MigPolicy.objects.on(cluster).exists()
        or MigPolicyChange.objects.on(cluster).filter(state=MigPolicyChange.State.PENDING).exists()
    ):
        return "The inference cluster has a MIG policy (or a change of it waits): left alone."
    offered = set(offered_profiles(cluster))
    grants = [dict(g) for g in data.MIG_POLICY_GRANTS if g["profile"] in offered]
    if not grants:
        return "The inference cluster publishes no MIG device yet: no MIG policy seeded."
    users = get_user_model().objects
    admin = users.get(username=next(u.username for u in data.USERS if "admin" in u.roles))
    approver = users.get(username=next(u.username for u in data.USERS if "approver" in u.roles))
    change = propose_mig_policy(
        actor=admin,
        cluster=cluster,
        governed=True,
        grants=grants,
        reason=data.MIG_POLICY_REASON,
        source=SOURCE,
    )
    approve_mig_policy_change(
        request_id=change.pk, approver=approver, comment=data.MIG_POLICY_COMMENT, source=SOURCE
    )
    return f"MIG policy #{change.pk} of the inference cluster proposed and approved."
