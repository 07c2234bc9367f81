"""What a cluster runs, decoded from what its API server says (pure: plain dicts in, facts out).

Each poll asks ``/version``, the group discovery ``/apis`` and, where the GPU Operator's
``nvidia.com`` group is served, its ClusterPolicies; the nodes' labels come from the poll's
own node list. From them: the Kubernetes version, the Kueue API versions served
(``v1beta2`` from Kueue 0.16, ``v1beta1`` no longer from 0.20), whether Volcano's CRDs are
there, whether the GPU Operator runs and the MIG strategy. ``render_target`` turns them into
the backend and Kueue version the portal renders for that cluster; ``compare_rules`` sets a
SelfSubjectRulesReview against the rules the portal needs.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

KUEUE_GROUP = "kueue.x-k8s.io"
KUEUE_VERSIONS = ("v1beta2", "v1beta1")  # the ones the portal renders, best first
VOLCANO_GROUPS = ("scheduling.volcano.sh", "batch.volcano.sh")
GPU_OPERATOR_GROUP = "nvidia.com"
MIG_STRATEGY_LABEL = "nvidia.com/mig.strategy"
# The GPU Operator puts these on every GPU node it manages (its operands' node selectors).
OPERATOR_NODE_LABEL = "nvidia.com/gpu.deploy.device-plugin"


@dataclass(frozen=True)
class Discovered:
    """What one poll found a cluster to run."""

    kubernetes_version: str
    kueue_versions: tuple[str, ...]
    volcano: bool
    gpu_operator: bool
    gpu_operator_detail: str
    mig_strategy: str


def served_versions(groups: Mapping[str, Any], group: str) -> tuple[str, ...]:
    """The versions of ``group`` an APIGroupList lists, the preferred one first."""
    for entry in groups.get("groups") or []:
        if entry.get("name") != group:
            continue
        versions = [v.get("version", "") for v in entry.get("versions") or []]
        preferred = (entry.get("preferredVersion") or {}).get("version", "")
        if preferred in versions:
            versions.remove(preferred)
            versions.insert(0, preferred)
        return tuple(v for v in versions if v)
    return ()


def decode_discovery(
    version: Mapping[str, Any],
    groups: Mapping[str, Any],
    *,
    cluster_policies: Sequence[Mapping[str, Any]] | None,
    node_labels: Iterable[Mapping[str, str]],
    device_plugin_nodes: int | None = None,
) -> Discovered:
    """The facts of one cluster. ``cluster_policies`` is None when they were not read (the
    group is not served, or the portal may not list them): the nodes' labels tell then,
    with the nodes the operator's device plugin pod runs on (``device_plugin_nodes``; None:
    not known) as the GPU Operator check counts them."""
    labels = list(node_labels)
    operator, detail, strategy = _gpu_operator(
        bool(served_versions(groups, GPU_OPERATOR_GROUP)),
        cluster_policies,
        labels,
        device_plugin_nodes,
    )
    return Discovered(
        kubernetes_version=str(version.get("gitVersion") or ""),
        kueue_versions=served_versions(groups, KUEUE_GROUP),
        volcano=any(served_versions(groups, g) for g in VOLCANO_GROUPS),
        gpu_operator=operator,
        gpu_operator_detail=detail,
        mig_strategy=strategy,
    )


def _gpu_operator(
    served: bool,
    policies: Sequence[Mapping[str, Any]] | None,
    labels: list[Mapping[str, str]],
    running: int | None = None,
) -> tuple[bool, str, str]:
    """(runs, in words, MIG strategy): the ClusterPolicy first, else the nodes' labels and
    the device plugin pods that run (a label says where the operator is to deploy its
    operands, not that they run there)."""
    strategies = Counter(
        node[MIG_STRATEGY_LABEL] for node in labels if node.get(MIG_STRATEGY_LABEL)
    )
    from_nodes = strategies.most_common(1)[0][0] if strategies else ""
    if policies:
        policy = policies[0]
        name = (policy.get("metadata") or {}).get("name", "")
        state = (policy.get("status") or {}).get("state") or "no state yet"
        mig = ((policy.get("spec") or {}).get("mig") or {}).get("strategy") or ""
        return True, f"ClusterPolicy {name}: {state}", mig or from_nodes
    managed = sum(1 for node in labels if node.get(OPERATOR_NODE_LABEL) == "true")
    if served and policies is not None:
        return False, "the ClusterPolicy CRD is installed but there is no ClusterPolicy", ""
    if managed:
        read = "not readable" if served else "not served"
        if running is None:
            return True, f"its operands on {managed} node(s) (ClusterPolicy {read})", from_nodes
        if not running:
            return (
                False,
                f"its labels on {managed} node(s), but its device plugin runs on none "
                f"(ClusterPolicy {read})",
                from_nodes,
            )
        return (
            True,
            f"its device plugin runs on {running} of {managed} labelled node(s) "
            f"(ClusterPolicy {read})",
            from_nodes,
        )
    return False, "no ClusterPolicy and no node labelled by the GPU Operator", from_nodes


def render_target(discovered: Discovered | None, *, backend: str, version: str) -> tuple[str, str]:
    """The (backend, Kueue version) to render for a cluster: the configured ones while
    nothing is discovered or what is configured is served; else what the cluster serves
    (the version the portal renders best among those served; Volcano when it has no Kueue
    but Volcano's CRDs)."""
    if discovered is None:
        return backend, version
    served = [v for v in KUEUE_VERSIONS if v in discovered.kueue_versions]
    if backend == "kueue" and not served and discovered.volcano:
        return "volcano", version
    if backend == "volcano" and not discovered.volcano and served:
        return "kueue", version if version in served else served[0]
    if backend == "kueue" and served and version not in served:
        return backend, served[0]
    return backend, version


# ------------------------------------------------------------------ what the portal may do


@dataclass(frozen=True)
class RuleCheck:
    """One resource the portal needs verbs on, and those of them the cluster does not grant."""

    group: str
    resource: str
    verbs: tuple[str, ...]
    missing: tuple[str, ...]

    @property
    def allowed(self) -> bool:
        return not self.missing

    @property
    def group_resource(self) -> str:
        """As the API server spells it: ``pods/eviction``, ``clusterqueues.kueue.x-k8s.io``."""
        return f"{self.resource}.{self.group}" if self.group else self.resource


def _covers(values: Iterable[str], wanted: str) -> bool:
    return any(value in ("*", wanted) for value in values)


def grants(
    rules: Sequence[Mapping[str, Any]],
    group: str,
    resource: str,
    verb: str,
    names: Sequence[str] = (),
) -> bool:
    """Whether one of the ``resourceRules`` of a review grants ``verb`` on ``resource``
    (``pods/eviction`` style subresources; ``*`` anywhere). A rule limited to some
    resourceNames counts only where the portal needs named objects (``names``: Kueue's
    ConfigMap) and it names them all."""
    for rule in rules:
        limited = rule.get("resourceNames")
        if limited and not (names and set(names) <= set(limited)):
            continue
        resources = rule.get("resources") or ()
        plural = resource.split("/")[0]
        resource_ok = _covers(resources, resource) or (
            "/" in resource and f"{plural}/*" in resources
        )
        if (
            resource_ok
            and _covers(rule.get("apiGroups") or (), group)
            and _covers(rule.get("verbs") or (), verb)
        ):
            return True
    return False


def compare_rules(
    needed: Sequence[Mapping[str, Any]], review: Mapping[str, Any]
) -> list[RuleCheck]:
    """Each (group, resource) of the ``needed`` PolicyRules with its verbs and the ones the
    review's status does not grant, the missing ones first, then in the rules' order."""
    granted = review.get("resourceRules") or []
    verbs: dict[tuple[str, str], list[str]] = {}
    names: dict[tuple[str, str], list[str]] = {}  # the named objects a rule is limited to
    for rule in needed:
        for group in rule.get("apiGroups") or ():
            for resource in rule.get("resources") or ():
                wanted = verbs.setdefault((group, resource), [])
                wanted.extend(v for v in rule.get("verbs") or () if v not in wanted)
                names.setdefault((group, resource), []).extend(rule.get("resourceNames") or ())
    checks = [
        RuleCheck(
            group,
            resource,
            tuple(wanted),
            tuple(
                v for v in wanted if not grants(granted, group, resource, v, names[group, resource])
            ),
        )
        for (group, resource), wanted in verbs.items()
    ]
    return sorted(checks, key=lambda check: check.allowed)  # stable: the rules' order
