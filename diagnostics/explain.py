"""Why is it Pending? One answer per waiting pod or Kueue workload, joining what the cluster
knows: the scheduler's FailedScheduling message (parsed), Kueue's admission message, the
namespace's ResourceQuota, and fleet facts (which nodes offer a resource at all, drift, MIG
changes in progress). Pure functions: callers pass the facts in.

Messages are parsed tolerantly (the wording moved between Kubernetes and Kueue releases);
the raw message is always kept as evidence.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from portal.quantity import QuantityError, parse_quantity

_HEAD = re.compile(r"0/(\d+) nodes are available: (.*?)\.(?: no new claims| preemption:|\s*$|$)")
_GROUP = re.compile(r"(\d+) (.+)")
_KUEUE_SHORT = re.compile(r"insufficient unused quota for (\S+) in flavor (\S+), (\S+) more needed")
_KUEUE_MAX = re.compile(
    r"insufficient quota for (\S+) in flavor (\S+)(?:, previously considered podsets requests \((\S+)\) "
    r"\+ current podset request \((\S+)\) > maximum capacity \((\S+)\)|, request > maximum capacity "
    r"\((\S+) > (\S+)\)| in ClusterQueue)"
)
_KUEUE_UNCOVERED = re.compile(r"resource (\S+) unavailable in ClusterQueue")


@dataclass(frozen=True)
class SchedulerVerdict:
    """A parsed ``0/N nodes are available: …`` message."""

    nodes: int
    insufficient: dict[str, int]
    untolerated_taint: int = 0
    selector_mismatch: int = 0
    unschedulable: int = 0
    other: tuple[str, ...] = ()


def parse_failed_scheduling(message: str) -> SchedulerVerdict | None:
    match = _HEAD.search(message or "")
    if not match:
        return None
    insufficient: dict[str, int] = {}
    taint = selector = cordoned = 0
    other = []
    for part in match.group(2).split(", "):
        group = _GROUP.match(part.strip())
        if not group:
            continue
        count, reason = int(group.group(1)), group.group(2)
        if reason.startswith("Insufficient "):
            insufficient[reason.removeprefix("Insufficient ")] = count
        elif "untolerated taint" in reason:
            taint += count
        elif (
            "didn't match Pod's node affinity/selector" in reason
            or "didn't match node selector" in reason
        ):
            selector += count
        elif "were unschedulable" in reason:
            cordoned += count
        else:
            other.append(reason)
    return SchedulerVerdict(
        int(match.group(1)), insufficient, taint, selector, cordoned, tuple(other)
    )


@dataclass(frozen=True)
class FleetView:
    """What the explainer needs to know about the fleet."""

    offered: Mapping[str, int]  # resource -> allocatable across the fleet
    free: Mapping[str, int]  # resource -> allocatable minus allocated
    offered_by_node: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    intended: Mapping[str, str] = field(default_factory=dict)  # node -> pool's intended config
    promised_by_intended: Mapping[str, Mapping[str, int]] = field(
        default_factory=dict
    )  # node -> resources
    current_config: Mapping[str, str] = field(default_factory=dict)
    drift_since: Mapping[str, str] = field(default_factory=dict)  # node -> "Nov 30 10:42"
    changed_by: Mapping[str, str] = field(default_factory=dict)  # node -> who set mig.config
    changing: Mapping[str, int] = field(default_factory=dict)  # node -> running request id
    tainted: Sequence[str] = ()  # "key=value:Effect on node-a, node-b"

    @cached_property
    def largest(self) -> Mapping[str, int]:
        """resource -> the most one node offers (computed once per view)."""
        most: dict[str, int] = {}
        for per in self.offered_by_node.values():
            for resource, count in per.items():
                if count > most.get(resource, 0):
                    most[resource] = count
        return most


@dataclass
class Explanation:
    cause: str
    next_step: str
    action: dict[str, str] | None = None  # {"label", "url"}
    evidence: list[str] = field(default_factory=list)
    topic: str = ""  # the fault table's entry (gpus.knowledge)


def _short(resource: str) -> str:
    return resource.removeprefix("nvidia.com/")


def explain_pod(
    *,
    namespace: str,
    name: str,
    requests: Mapping[str, int],
    message: str,
    fleet: FleetView,
    quota: Mapping[str, tuple[int, int]] | None = None,
    node_name: str = "",
    defaulted: Sequence[str] = (),
) -> Explanation:
    """A Pending pod: ``message`` is the scheduler's; ``quota`` maps a resource to the
    namespace quota's (hard, used). The first cause that holds, in the scheduler's order:
    too few of a GPU resource, then taints, the node selector, cordoned nodes. A pod the
    scheduler already bound to a node waits on that node, not on the scheduler. ``defaulted``
    names the GPU resources the namespace's LimitRange added (the pod did not ask): when the
    pod waits for one of those, that is the cause."""
    evidence = [message] if message else []
    if node_name:
        return Explanation(
            f"The pod is placed on {node_name} but has not started: its containers are still "
            "being created there (pulling the image, mounting volumes, or waiting for the GPU "
            "device plugin).",
            f"Look at the pod's events (kubectl -n {namespace} describe pod {name}): an image "
            "that cannot be pulled or a volume that cannot be mounted is named there.",
            None,
            evidence,
        )
    verdict = parse_failed_scheduling(message)
    if verdict is None:
        return Explanation(
            "The scheduler has not looked at this pod yet.",
            "Wait a few seconds; if it stays, check the scheduler.",
            None,
            evidence,
        )
    if any(resource in verdict.insufficient for resource in defaulted):
        return _limit_range_added(namespace, requests, defaulted, evidence)
    for resource, _count in sorted(verdict.insufficient.items(), key=lambda item: -item[1]):
        found = _insufficient(resource, requests.get(resource, 0), fleet, evidence)
        if found is not None:
            return found
    return _placement(verdict, fleet, evidence, quota)


def _limit_range_added(
    namespace: str, requests: Mapping[str, int], defaulted: Sequence[str], evidence: list[str]
) -> Explanation:
    """A pod that waits for a device the namespace's LimitRange gave it (a default, or a
    ``max`` the API server stored as the default)."""
    added = {r: requests.get(r, 0) for r in defaulted if requests.get(r, 0)}
    asked = {r: n for r, n in requests.items() if r not in added}
    whole_for_mig = "nvidia.com/gpu" in added and any(
        r.startswith("nvidia.com/mig-") for r in asked
    )
    also = (
        " A MIG change alone will not start it: it needs a whole GPU as well."
        if whole_for_mig
        else ""
    )
    wants = f"it asks for {_amounts(asked)}" if asked else "it asks for no GPU itself"
    optout = ", ".join(f"{r}: 0" for r in sorted(added))
    return Explanation(
        f"The LimitRange of {namespace} gave the pod {_amounts(added)} it did not ask for "
        f"({wants}), and no node has that free.{also}",
        f"Set {optout} in the pod's container limits, or ask a platform admin to take the "
        f"default out of {namespace}'s LimitRange (a max alone becomes the default too).",
        None,
        evidence,
        topic="pod-pending",
    )


def _insufficient(
    resource: str, wanted: int, fleet: FleetView, evidence: list[str]
) -> Explanation | None:
    """Why too few of ``resource`` are free: a pod larger than any node, a drifted node
    (being fixed, or to fix), a profile nobody offers, or busy GPUs. None when the fleet
    has enough free (another reason keeps the pod off those nodes)."""
    offered = fleet.offered.get(resource, 0)
    free = fleet.free.get(resource, 0)
    biggest = fleet.largest.get(resource, 0)
    if offered and wanted > biggest:
        return Explanation(
            f"The pod asks for {wanted} {_short(resource)} on one node; the largest node offers "
            f"{biggest}.",
            "Split the job across pods (one per node) or ask for fewer per pod.",
            None,
            evidence,
            topic="insufficient-gpu",
        )
    if offered and free >= wanted:
        return None
    lead = _lead(resource, offered, free, wanted)
    drifted = [
        node
        for node, promised in sorted(fleet.promised_by_intended.items())
        if promised.get(resource, 0) and fleet.current_config.get(node) != fleet.intended.get(node)
    ]
    for node in drifted:
        if node in fleet.changing:
            request = fleet.changing[node]
            return Explanation(
                f"{lead}{node} is being reconfigured to {fleet.intended[node]} by request "
                f"#{request}.",
                "Wait for the change to finish; the pod is placed after it.",
                {"label": f"Open request #{request}", "url": f"/changes/{request}/"},
                evidence,
                topic="mig-mismatch",
            )
    if drifted:
        return _drifted(drifted[0], resource, lead, fleet, evidence)
    if not offered:
        return _not_offered(resource, fleet, evidence)
    return Explanation(
        f"{lead.rstrip(': ')}.",
        "It starts when running work finishes; a higher priority class lets it preempt.",
        None,
        evidence,
        topic="insufficient-gpu",
    )


def _drifted(
    node: str, resource: str, lead: str, fleet: FleetView, evidence: list[str]
) -> Explanation:
    """A node that would offer the resource on its pool's layout, changed to another one."""
    since = f" (drift since {fleet.drift_since[node]})" if node in fleet.drift_since else ""
    extra = fleet.promised_by_intended[node].get(resource, 0)
    by = f" by {fleet.changed_by[node]}" if fleet.changed_by.get(node) else ""
    return Explanation(
        f"{lead}{node} would offer {extra} more but was changed "
        f"to {fleet.current_config.get(node) or 'another layout'}{by} instead of its pool's "
        f"{fleet.intended[node]}{since}.",
        f"Ask for a MIG change that puts {node} back on {fleet.intended[node]}.",
        {
            "label": "Ask for a MIG change",
            "url": f"/changes/new/?nodes={node}&target_config={fleet.intended[node]}",
        },
        evidence,
        topic="mig-mismatch",
    )


def _not_offered(resource: str, fleet: FleetView, evidence: list[str]) -> Explanation:
    others = sorted(
        {
            _short(r)
            for per in fleet.offered_by_node.values()
            for r, n in per.items()
            if n and r.startswith("nvidia.com/mig-")
        }
    )
    alternatives = (
        f" The fleet offers {', '.join(others)}." if others and "mig-" in resource else ""
    )
    return Explanation(
        f"No node offers {resource}.{alternatives}",
        "Ask for a MIG change to a layout with this profile, or ask for a profile the fleet has.",
        {"label": "Ask for a MIG change", "url": "/changes/new/"},
        evidence,
        topic="mig-mismatch" if "mig-" in resource else "insufficient-gpu",
    )


def _placement(
    verdict: SchedulerVerdict,
    fleet: FleetView,
    evidence: list[str],
    quota: Mapping[str, tuple[int, int]] | None,
) -> Explanation:
    """Nodes with the resources exist, but the pod may not go there."""
    if verdict.untolerated_taint:
        where = f" ({'; '.join(fleet.tainted)})" if fleet.tainted else ""
        return Explanation(
            f"{verdict.untolerated_taint} node(s) with the resources carry taints the pod does not "
            f"tolerate{where}.",
            "Add the matching toleration to the pod (or submit through a queue whose flavor adds it).",
            None,
            evidence,
            topic="pod-pending",
        )
    if verdict.selector_mismatch == verdict.nodes:
        return Explanation(
            "No node matches the pod's node selector or affinity.",
            "Check the selector's labels against the Fleet page.",
            None,
            evidence,
            topic="pod-pending",
        )
    if verdict.unschedulable:
        return Explanation(
            f"{verdict.unschedulable} node(s) are cordoned.",
            "Wait for maintenance (or a MIG change) to finish.",
            None,
            evidence,
        )
    if quota:
        for resource, (hard, used) in quota.items():
            if used >= hard:
                evidence.append(f"namespace quota {resource}: {used}/{hard} used")
    return Explanation(
        "The scheduler found no node for it.", "Read the scheduler's message below.", None, evidence
    )


@dataclass(frozen=True)
class Gang:
    """A Volcano PodGroup and where its member pods are."""

    name: str
    queue: str
    min_member: int
    running: int  # member pods running
    pending: int  # member pods waiting
    held: Mapping[str, int]  # GPU resources the running members hold
    min_resources: Mapping[str, str]
    message: str = ""


_UID_SUFFIX = re.compile(r"-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


def _amounts(values: Mapping[str, Any]) -> str:
    return ", ".join(f"{v} {_short(k)}" for k, v in sorted(values.items())) or "nothing"


def explain_gang(*, namespace: str, name: str, gang: Gang) -> Explanation:
    """A Pending pod of a gang (Volcano starts none or all of its ``minMember`` pods)."""
    job = _UID_SUFFIX.sub("", gang.name)
    evidence = [f"Volcano: {gang.message}"] if gang.message else []
    wants = _amounts(gang.min_resources)
    if 0 < gang.running < gang.min_member:
        return Explanation(
            f"Only part of gang {job} is placed: {gang.running} of the {gang.min_member} pods it "
            f"needs together run and hold {_amounts(gang.held)}, {gang.pending} wait.",
            f"The gang does no work until all {gang.min_member} run: ask for room for {wants} in "
            f"queue {gang.queue}, or stop the job and resubmit it smaller.",
            {"label": "Ask for quota", "url": "/quota/new/"},
            evidence,
            topic="gang-deadlock",
        )
    return Explanation(
        f"Gang {job} waits until all {gang.min_member} of its pods can start together.",
        f"It starts when queue {gang.queue} has room for {wants}; ask for more if this is normal "
        "now.",
        {"label": "Ask for quota", "url": "/quota/new/"},
        evidence,
        topic="gang-deadlock",
    )


_QUOTA_REFUSAL = re.compile(
    r'pods "(?P<pod>[^"]*)" is forbidden: exceeded quota: (?P<quota>[^,]+), '
    r"requested: (?P<requested>.+?), used: (?P<used>.+?), limited: (?P<limited>.+)$"
)


def _pairs(text: str) -> dict[str, str]:
    return dict(item.split("=", 1) for item in text.split(",") if "=" in item)


def explain_create_failure(*, namespace: str, kind: str, name: str, message: str) -> Explanation:
    """A controller (a Job, a ReplicaSet) whose pods the API server refuses to create."""
    refusal = message.removeprefix("Error creating: ")
    evidence = [message]
    quota = _QUOTA_REFUSAL.search(refusal)
    if quota:
        requested, used = _pairs(quota["requested"]), _pairs(quota["used"])
        limited = _pairs(quota["limited"])
        never = _never_fits(kind, name, namespace, quota["quota"], requested, limited, evidence)
        if never is not None:
            return never
        parts = [
            f"{limited[k]} {k} in {namespace}, {used.get(k, '0')} are in use and a new pod asks "
            f"for {requested.get(k, '?')}"
            for k in sorted(limited)
        ]
        return Explanation(
            f"{kind} {name} cannot create its pods: quota {quota['quota']} allows "
            + "; ".join(parts)
            + ".",
            "Wait for running pods to finish, make the pods smaller, or ask for more quota.",
            {"label": "Ask for quota", "url": "/quota/new/"},
            evidence,
            topic="quota-exceeded",
        )
    return Explanation(
        f"{kind} {name} cannot create its pods: the API server refuses them.",
        "Fix what the API server refuses (its words below), then the controller tries again.",
        None,
        evidence,
    )


def _never_fits(
    kind: str,
    name: str,
    namespace: str,
    quota: str,
    requested: Mapping[str, str],
    limited: Mapping[str, str],
    evidence: list[str],
) -> Explanation | None:
    """A pod larger than the quota's whole hard limit: no amount of waiting creates it."""
    over = []
    for key in sorted(limited):
        try:
            if parse_quantity(requested.get(key, "0")) > parse_quantity(limited[key]):
                over.append(key)
        except QuantityError:
            continue
    if not over:
        return None
    parts = "; ".join(f"{requested[k]} {k}, more than its {limited[k]} in all" for k in over)
    most = ", ".join(f"{limited[k]} {k}" for k in over)
    return Explanation(
        f"{kind} {name} can never create its pods: each asks for {parts} (quota {quota} of "
        f"{namespace}). Waiting will not help.",
        f"Make each pod ask for at most {most}, or ask for a larger quota.",
        {"label": "Ask for quota", "url": "/quota/new/"},
        evidence,
        topic="quota-exceeded",
    )


def _lead(resource: str, offered: int, free: int, wanted: int) -> str:
    if not offered:
        return f"No node offers {resource}: "
    return f"All {offered} {_short(resource)} in the fleet are in use ({free} free, the pod needs {wanted}): "


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def explain_workload(
    *,
    namespace: str,
    name: str,
    queue: str,
    reason: str,
    message: str,
    quota: Mapping[str, tuple[int, int]] | None = None,
    position: int | None = None,
    cluster_queue: str = "",
) -> Explanation:
    """A Kueue workload that is not admitted (its Job stays suspended); ``position`` is its
    0-based place in its ClusterQueue (Kueue's visibility API), when known."""
    why = _explain_workload(
        namespace=namespace, name=name, queue=queue, reason=reason, message=message
    )
    if position is not None:
        where = f" for {cluster_queue}" if cluster_queue else ""
        why.cause = f"{why.cause} It is {_ordinal(position + 1)} in line{where}."
    return why


def _explain_workload(
    *,
    namespace: str,
    name: str,
    queue: str,
    reason: str,
    message: str,
) -> Explanation:
    evidence = [message] if message else []
    short = _KUEUE_SHORT.search(message or "")
    if short:
        resource, flavor, more = short.groups()
        return Explanation(
            f"Queue {queue} has no unused quota for {resource} in flavor {flavor}: {more} more needed.",
            "It is admitted when other workloads finish; ask for more queue quota if this is normal "
            "now.",
            {"label": "Ask for quota", "url": "/quota/new/"},
            evidence,
            topic="queue-quota",
        )
    maximum = _KUEUE_MAX.search(message or "")
    if maximum:
        resource, flavor = maximum.group(1), maximum.group(2)
        limit = maximum.group(5) or maximum.group(7)
        cap = f" (at most {limit})" if limit else ""
        return Explanation(
            f"The workload asks for more {resource} in flavor {flavor} than queue {queue} can ever "
            f"give{cap}.",
            "Make it smaller, or ask for a larger nominal quota or borrowing limit.",
            {"label": "Ask for quota", "url": "/quota/new/"},
            evidence,
            topic="queue-quota",
        )
    uncovered = _KUEUE_UNCOVERED.search(message or "")
    if uncovered:
        return Explanation(
            f"Queue {queue}'s ClusterQueue does not cover {uncovered.group(1)} at all.",
            "Ask a platform admin to add the resource to the ClusterQueue.",
            None,
            evidence,
        )
    if "doesn't exist" in (message or ""):
        return Explanation(
            f"{message.rstrip('.')} in namespace {namespace}.",
            "Use one of the namespace's LocalQueues in the job's kueue.x-k8s.io/queue-name label.",
            None,
            evidence,
        )
    if "namespace doesn't match ClusterQueue selector" in (message or ""):
        return Explanation(
            f"Namespace {namespace} may not use the ClusterQueue behind {queue}.",
            "Ask a platform admin to give the namespace a LocalQueue on it.",
            None,
            evidence,
        )
    if "inactive" in (message or "") or "stopped" in (message or ""):
        return Explanation(
            f"{message.rstrip('.')}.", "Ask a platform admin why the queue is held.", None, evidence
        )
    if not message:
        return Explanation(
            "Kueue has not looked at this workload yet.", "Wait a few seconds.", None, []
        )
    return Explanation("Kueue has not admitted it.", "Read Kueue's message below.", None, evidence)


def fleet_view(
    nodes: Sequence[Any],
    pods: Sequence[Any],
    pools: Sequence[Any],
    drift: Sequence[Any],
    changing: Mapping[str, int],
    promised: Mapping[str, Mapping[str, int]],
) -> FleetView:
    """Build the view from observed rows (ObservedNode, ObservedPod, NodePool, Drift)."""
    offered: dict[str, int] = {}
    free: dict[str, int] = {}
    per_node: dict[str, dict[str, int]] = {}
    tainted: dict[str, list[str]] = {}
    for node in nodes:
        mine = {
            r: int(v)
            for r, v in node.allocatable.items()
            if r.startswith("nvidia.com/") and str(v).isdigit() and int(v) > 0
        }
        per_node[node.name] = mine
        for resource, amount in mine.items():
            offered[resource] = offered.get(resource, 0) + amount
            free[resource] = free.get(resource, 0) + amount - int(node.allocated.get(resource, 0))
        for taint in node.taints or []:
            key = f"{taint.get('key')}={taint.get('value', '')}:{taint.get('effect')}"
            tainted.setdefault(key, []).append(node.name)
    intended = {}
    for node in nodes:
        pool = next((p for p in pools if p.mig_config and p.selects(node.labels)), None)
        if pool is not None:
            intended[node.name] = pool.mig_config
    return FleetView(
        offered=offered,
        free=free,
        offered_by_node=per_node,
        intended=intended,
        promised_by_intended={n: promised[n] for n in intended if n in promised},
        current_config={n.name: n.mig_config for n in nodes},
        drift_since={
            d.subject: d.first_seen.strftime("%b %d %H:%M") for d in drift if d.kind == "mig_layout"
        },
        changed_by={
            n.name: n.mig_config_by.partition(" at ")[0]
            for n in nodes
            if getattr(n, "mig_config_by", "")
        },
        changing=changing,
        tainted=[f"{key} on {', '.join(names)}" for key, names in sorted(tainted.items())],
    )
