"""Everything the portal manages, rendered in apply order (a read: a fixed number of queries).

Order: Namespaces, DeviceClasses (a governed cluster's MIG profiles), PriorityClasses,
ResourceQuotas (a governed cluster's MIG policy's among them), LimitRanges, then the queue backend's
objects (Kueue: ResourceFlavor -> Cohort, parents first -> ClusterQueue -> LocalQueue;
Volcano: Queue). Delete in reverse.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import yaml
from django.db.models import Q

from cluster.models import Cluster, ObservedDeviceClass
from cluster.selectors import rendering_for
from cluster.services import settings_cluster
from queues import manifests as queue_manifests
from queues.models import ClusterQueue, Cohort, LocalQueue, ResourceFlavor
from tenants import manifests as tenant_manifests
from tenants import mig_policy
from tenants.models import (
    LimitRangeItem,
    MigGrant,
    MigPolicy,
    Namespace,
    PriorityClass,
    QuotaItem,
)

Manifest = dict[str, Any]


def collect_manifests(
    *,
    team_slug: str | None = None,
    backend: str | None = None,
    version: str | None = None,
    cluster: Cluster | None = None,
) -> list[Manifest]:
    """All desired objects of one ``cluster`` (by default the settings' cluster); with
    ``team_slug``, only that team's namespaced objects there. The backend and Kueue version
    are the given ones, else the settings' following what the cluster was discovered to
    serve (``cluster.discovery.render_target``)."""
    cluster = cluster or settings_cluster()
    if backend is None or version is None:
        found_backend, found_version = rendering_for(cluster)
        backend, version = backend or found_backend, version or found_version
    # Each table read once, its rows grouped here: a prefetch (or a join per LocalQueue)
    # built a queryset per namespace and the same namespace, team and ClusterQueue again
    # for each of its queues, most of what this read cost at a few thousand namespaces.
    namespaces = list(Namespace.objects.filter(cluster=cluster).select_related("team"))
    local_queues = list(LocalQueue.objects.filter(namespace__cluster=cluster))
    named = _Named(cluster, namespaces, local_queues)
    if team_slug is not None:
        namespaces = [ns for ns in namespaces if ns.team.slug == team_slug]
        local_queues = [lq for lq in local_queues if named.team(lq) == team_slug]
    everything = team_slug is None
    out = _tenant_objects(namespaces, local_queues, named, backend=backend, everything=everything)
    policy = MigPolicy.objects.on(cluster).filter(governed=True).first()
    if policy is not None:
        device_classes, quotas = _mig_policy_objects(policy, namespaces)
        # DeviceClasses after the Namespaces, the policy's quotas with the other quotas.
        out[len(namespaces) : len(namespaces)] = device_classes if everything else []
        at = next(
            (i for i, m in enumerate(out) if m["kind"] == "ResourceQuota"),
            next((i for i, m in enumerate(out) if m["kind"] == "LimitRange"), len(out)),
        )
        out[at:at] = quotas
    if everything:
        # After the Namespaces: a catalog entry applied to every cluster, or to this one.
        classes = PriorityClass.objects.filter(Q(clusters=None) | Q(clusters=cluster)).distinct()
        out[len(namespaces) : len(namespaces)] = [
            tenant_manifests.render_priority_class(pc) for pc in classes
        ]
    if backend == "volcano":
        if everything:
            out.extend(
                queue_manifests.render_volcano_queue(cq, has_cohort=cq.cohort_id is not None)
                for cq in ClusterQueue.objects.filter(cluster=cluster)
            )
        return out
    if everything:
        out.extend(_kueue_cluster_objects(cluster, named, version))
    out.extend(
        queue_manifests.render_local_queue(
            lq,
            namespace=named.namespaces[lq.namespace_id].name,
            team_slug=named.team(lq),
            cluster_queue_name=named.cluster_queues[lq.cluster_queue_id],
            version=version,
        )
        for lq in local_queues
    )
    return out


class _Named:
    """What the renderers name beside a row, read once for the cluster: each namespace
    (with its team), each LocalQueue's ClusterQueue's name, each namespace's quota and
    LimitRange items, and which namespaces each ClusterQueue's LocalQueues are in."""

    def __init__(
        self, cluster: Cluster, namespaces: list[Namespace], local_queues: list[LocalQueue]
    ) -> None:
        self.namespaces = {ns.pk: ns for ns in namespaces}
        self.cluster_queues: dict[int, str] = dict(
            ClusterQueue.objects.filter(
                pk__in={lq.cluster_queue_id for lq in local_queues}
            ).values_list("pk", "name")
        )
        self.quota_items: dict[int, list[QuotaItem]] = defaultdict(list)
        for quota_item in QuotaItem.objects.filter(namespace__cluster=cluster):
            self.quota_items[quota_item.namespace_id].append(quota_item)
        self.limit_items: dict[int, list[LimitRangeItem]] = defaultdict(list)
        for limit_item in LimitRangeItem.objects.filter(namespace__cluster=cluster):
            self.limit_items[limit_item.namespace_id].append(limit_item)
        self.namespaces_of: dict[int, list[str]] = defaultdict(list)
        for lq in local_queues:
            self.namespaces_of[lq.cluster_queue_id].append(self.namespaces[lq.namespace_id].name)

    def team(self, lq: LocalQueue) -> str:
        return str(self.namespaces[lq.namespace_id].team.slug)


def _tenant_objects(
    namespaces: list[Namespace],
    local_queues: list[LocalQueue],
    named: _Named,
    *,
    backend: str,
    everything: bool,
) -> list[Manifest]:
    """Namespaces, then ResourceQuotas, then LimitRanges (the caller puts the
    PriorityClasses after the Namespaces). With Volcano, a namespace with one LocalQueue
    names its queue."""
    queues_by_namespace: dict[int, list[LocalQueue]] = defaultdict(list)
    for lq in local_queues:
        queues_by_namespace[lq.namespace_id].append(lq)
    out: list[Manifest] = []
    for ns in namespaces:
        volcano_queue = ""
        if backend == "volcano" and len(queues_by_namespace[ns.pk]) == 1:
            volcano_queue = named.cluster_queues[queues_by_namespace[ns.pk][0].cluster_queue_id]
        out.append(
            tenant_manifests.render_namespace(
                ns, team_slug=ns.team.slug, volcano_queue=volcano_queue
            )
        )
    quotas = [
        tenant_manifests.render_resource_quota(ns, named.quota_items[ns.pk], team_slug=ns.team.slug)
        for ns in namespaces
    ]
    limits = [
        tenant_manifests.render_limit_range(ns, named.limit_items[ns.pk], team_slug=ns.team.slug)
        for ns in namespaces
    ]
    return out + [q for q in quotas if q] + [lr for lr in limits if lr]


def _mig_policy_objects(
    policy: MigPolicy, namespaces: list[Namespace]
) -> tuple[list[Manifest], list[Manifest]]:
    """A governed cluster's MIG policy as objects: a DeviceClass per profile it keeps, and
    each namespace's quota allowing its grants and closing every other class that selects
    MIG devices (``tenants/mig_policy.py``)."""
    grants: dict[int, dict[str, int]] = defaultdict(dict)
    for namespace_id, profile, devices in MigGrant.objects.filter(policy=policy).values_list(
        "namespace_id", "profile", "devices"
    ):
        grants[namespace_id][profile] = devices
    profiles = sorted({*policy.profiles, *(p for g in grants.values() for p in g)})
    ours = {mig_policy.profile_class(p) for p in profiles}
    closed = [
        name
        for name, selectors in ObservedDeviceClass.objects.on(policy.cluster_id).values_list(
            "name", "selectors"
        )
        if name not in ours and mig_policy.selects_mig(selectors, profiles)
    ]
    classes = [mig_policy.render_profile_class(p) for p in profiles]
    quotas = [
        mig_policy.render_policy_quota(
            ns.name,
            mig_policy.policy_hard(grants[ns.pk], profiles=profiles, closed=closed),
            team_slug=ns.team.slug,
        )
        for ns in namespaces
    ]
    return classes, quotas


def _kueue_cluster_objects(cluster: Cluster, named: _Named, version: str) -> list[Manifest]:
    """The cluster's ResourceFlavors, Cohorts (parents first), ClusterQueues (each
    admitting the namespaces of its LocalQueues unless the admin set a selector)."""
    out = [
        queue_manifests.render_resource_flavor(f, version=version)
        for f in ResourceFlavor.objects.filter(cluster=cluster)
    ]
    cohorts = {c.pk: c for c in Cohort.objects.filter(cluster=cluster)}
    for cohort in _parents_first(cohorts):
        parent = cohorts[cohort.parent_id].name if cohort.parent_id else None
        out.append(queue_manifests.render_cohort(cohort, parent_name=parent, version=version))
    for cq in ClusterQueue.objects.filter(cluster=cluster):
        out.append(
            queue_manifests.render_cluster_queue(
                cq,
                cohort_name=cohorts[cq.cohort_id].name if cq.cohort_id else None,
                namespaces=named.namespaces_of[cq.pk],
                version=version,
            )
        )
    return out


def _parents_first(cohorts: dict[int, Cohort]) -> list[Cohort]:
    ordered: list[Cohort] = []
    placed: set[int] = set()

    def place(cohort: Cohort, trail: frozenset[int]) -> None:
        if cohort.pk in placed or cohort.pk in trail:
            return
        if cohort.parent_id in cohorts:
            place(cohorts[cohort.parent_id], trail | {cohort.pk})
        placed.add(cohort.pk)
        ordered.append(cohort)

    for cohort in sorted(cohorts.values(), key=lambda c: c.name):
        place(cohort, frozenset())
    return ordered


def to_yaml_stream(manifests: list[Manifest]) -> str:
    """A YAML stream ready for ``kubectl apply -f -`` or a GitOps repository."""
    return yaml.safe_dump_all(manifests, sort_keys=False, default_flow_style=False)
