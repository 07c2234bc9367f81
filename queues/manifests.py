"""Pure renderers: queue models -> Kueue (v1beta2 or v1beta1) or Volcano objects.

No I/O and no queries: callers pass related names (cohort, namespaces) explicitly.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from fractions import Fraction
from typing import Any

from portal.vocabulary.labels import managed_labels
from portal.vocabulary.quantity import format_quantity, parse_quantity
from queues.models import ClusterQueue, Cohort, LocalQueue, ResourceFlavor
from queues.rules import quota_entries

KUEUE_GROUP = "kueue.x-k8s.io"
KUEUE_VERSIONS = ("v1beta2", "v1beta1")
# Kueue before 0.16 (the clusters v1beta1 is rendered for) knows these by their old names
# only; later releases still take them (deprecated) in either version.
V1BETA1_FUNGIBILITY = {
    "whenCanBorrow": {"MayStopSearch": "Borrow"},
    "whenCanPreempt": {"MayStopSearch": "Preempt"},
}
VOLCANO_QUEUE_API = "scheduling.volcano.sh/v1beta1"
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
VOLCANO_MAX_WEIGHT = 65535

Manifest = dict[str, Any]


def kueue_api(version: str) -> str:
    if version not in KUEUE_VERSIONS:
        raise ValueError(f"unsupported Kueue API version {version!r}")
    return f"{KUEUE_GROUP}/{version}"


def _metadata(name: str, namespace: str | None = None, team: str | None = None) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name}
    if namespace:
        metadata["namespace"] = namespace
    metadata["labels"] = managed_labels(team)
    return metadata


def _resource_groups(groups: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Quantities as strings, as Kueue's webhook stores them (an integer differs from the
    stored object, so every apply would bump the ClusterQueue's generation)."""
    rendered = []
    for group in groups:
        flavors = []
        for flavor in group["flavors"]:
            resources = []
            for quota in flavor["resources"]:
                entry: dict[str, Any] = {
                    "name": quota["name"],
                    "nominalQuota": str(quota["nominalQuota"]),
                }
                for key in ("borrowingLimit", "lendingLimit"):
                    if quota.get(key) not in (None, ""):
                        entry[key] = str(quota[key])
                resources.append(entry)
            flavors.append({"name": flavor["name"], "resources": resources})
        rendered.append({"coveredResources": list(group["coveredResources"]), "flavors": flavors})
    return rendered


def render_resource_flavor(flavor: ResourceFlavor, *, version: str = "v1beta2") -> Manifest:
    spec: dict[str, Any] = {}
    if flavor.node_labels:
        spec["nodeLabels"] = dict(sorted(flavor.node_labels.items()))
    if flavor.node_taints:
        spec["nodeTaints"] = [dict(t) for t in flavor.node_taints]
    if flavor.tolerations:
        spec["tolerations"] = [dict(t) for t in flavor.tolerations]
    if flavor.topology_name:
        spec["topologyName"] = flavor.topology_name
    return {
        "apiVersion": kueue_api(version),
        "kind": "ResourceFlavor",
        "metadata": _metadata(flavor.name),
        "spec": spec,
    }


def render_cohort(cohort: Cohort, *, parent_name: str | None, version: str = "v1beta2") -> Manifest:
    spec: dict[str, Any] = {}
    if parent_name:
        spec["parentName"] = parent_name
    if cohort.fair_sharing_weight:
        spec["fairSharing"] = {"weight": str(cohort.fair_sharing_weight)}
    if cohort.resource_groups:
        spec["resourceGroups"] = _resource_groups(cohort.resource_groups)
    return {
        "apiVersion": kueue_api(version),
        "kind": "Cohort",
        "metadata": _metadata(cohort.name),
        "spec": spec,
    }


def namespace_selector(cq: ClusterQueue, namespaces: Iterable[str]) -> dict[str, Any] | None:
    """The CQ's explicit selector, else exactly the namespaces with a LocalQueue on it.

    None (the field left unset) admits no namespace, which is Kueue's meaning too.
    """
    if cq.namespace_selector is not None:
        return dict(cq.namespace_selector)
    names = sorted(set(namespaces))
    if not names:
        return None
    return {"matchExpressions": [{"key": NAMESPACE_NAME_LABEL, "operator": "In", "values": names}]}


def render_cluster_queue(
    cq: ClusterQueue,
    *,
    cohort_name: str | None,
    namespaces: Iterable[str],
    version: str = "v1beta2",
) -> Manifest:
    """A ClusterQueue; ``namespaces`` are those whose LocalQueues point at it."""
    spec: dict[str, Any] = {}
    if cohort_name:
        spec["cohortName" if version == "v1beta2" else "cohort"] = cohort_name
    selector = namespace_selector(cq, namespaces)
    if selector is not None:
        spec["namespaceSelector"] = selector
    spec["queueingStrategy"] = cq.queueing_strategy
    spec["stopPolicy"] = cq.stop_policy
    if cq.fair_sharing_weight:
        spec["fairSharing"] = {"weight": str(cq.fair_sharing_weight)}
    borrow: dict[str, Any] = {"policy": cq.preemption_borrow_within_cohort}
    if cq.borrow_max_priority_threshold is not None:
        borrow["maxPriorityThreshold"] = cq.borrow_max_priority_threshold
    spec["preemption"] = {
        "withinClusterQueue": cq.preemption_within_cluster_queue,
        "reclaimWithinCohort": cq.preemption_reclaim_within_cohort,
        "borrowWithinCohort": borrow,
    }
    fungibility = {"whenCanBorrow": cq.when_can_borrow, "whenCanPreempt": cq.when_can_preempt}
    if version == "v1beta1":
        fungibility = {k: V1BETA1_FUNGIBILITY[k].get(v, v) for k, v in fungibility.items()}
    if cq.flavor_fungibility_preference:
        fungibility["preference"] = cq.flavor_fungibility_preference
    spec["flavorFungibility"] = fungibility
    spec["resourceGroups"] = _resource_groups(cq.resource_groups)
    return {
        "apiVersion": kueue_api(version),
        "kind": "ClusterQueue",
        "metadata": _metadata(cq.name),
        "spec": spec,
    }


def render_local_queue(
    lq: LocalQueue,
    *,
    namespace: str,
    team_slug: str,
    cluster_queue_name: str,
    version: str = "v1beta2",
) -> Manifest:
    return {
        "apiVersion": kueue_api(version),
        "kind": "LocalQueue",
        "metadata": _metadata(lq.name, namespace=namespace, team=team_slug),
        "spec": {"clusterQueue": cluster_queue_name, "stopPolicy": lq.effective_stop_policy},
    }


def _volcano_resources(totals: Mapping[str, Fraction]) -> dict[str, str]:
    return {name: format_quantity(value) for name, value in sorted(totals.items())}


def render_volcano_queue(cq: ClusterQueue, *, has_cohort: bool) -> Manifest:
    """A Volcano Queue from a ClusterQueue (see the README's Volcano mapping).

    Volcano has no flavors, so quotas are summed per resource across flavors:
    ``deserved`` = nominal quota, ``capability`` = nominal + borrowing limit (unlimited when
    the queue may borrow without a limit), ``guarantee`` = nominal - lending limit.
    """
    nominal: dict[str, Fraction] = {}
    ceiling: dict[str, Fraction] = {}
    unlimited: set[str] = set()
    guarantee: dict[str, Fraction] = {}
    for _, _, quota in quota_entries(cq.resource_groups):
        name = quota["name"]
        amount = parse_quantity(str(quota["nominalQuota"]))
        nominal[name] = nominal.get(name, Fraction(0)) + amount
        borrowing = quota.get("borrowingLimit")
        if has_cohort and borrowing in (None, ""):
            unlimited.add(name)
        extra = parse_quantity(str(borrowing)) if has_cohort and borrowing else Fraction(0)
        ceiling[name] = ceiling.get(name, Fraction(0)) + amount + extra
        lending = quota.get("lendingLimit")
        if lending not in (None, ""):
            guarantee[name] = (
                guarantee.get(name, Fraction(0)) + amount - parse_quantity(str(lending))
            )
    spec: dict[str, Any] = {
        "weight": volcano_weight(cq.fair_sharing_weight),
        "reclaimable": True,
        "parent": "root",
        "dequeueStrategy": "fifo" if cq.queueing_strategy == "StrictFIFO" else "traverse",
    }
    capability = {k: v for k, v in ceiling.items() if k not in unlimited}
    if capability:
        spec["capability"] = _volcano_resources(capability)
    if nominal:
        spec["deserved"] = _volcano_resources(nominal)
    if guarantee:
        spec["guarantee"] = {"resource": _volcano_resources(guarantee)}
    return {
        "apiVersion": VOLCANO_QUEUE_API,
        "kind": "Queue",
        "metadata": _metadata(cq.name),
        "spec": spec,
    }


def volcano_weight(weight: str) -> int:
    """Volcano's integer weight (1..65535) from a Kueue fair-sharing weight (default 1)."""
    if not weight:
        return 1
    value = parse_quantity(weight)
    return max(1, min(VOLCANO_MAX_WEIGHT, round(value)))
