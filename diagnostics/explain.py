"""Why is it Pending? One answer per waiting pod or Kueue workload, joining what the cluster
knows: the scheduler's FailedScheduling message (parsed), Kueue's admission message, the
namespace's ResourceQuota, and fleet facts (which nodes offer a resource at all, drift, MIG
changes in progress). Pure functions: callers pass the facts in.

Messages are parsed tolerantly (the wording moved between Kubernetes and Kueue releases);
the raw message is always kept as evidence.
"""

from __future__ import annotations

import datetime as dt
import itertools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any
from urllib.parse import urlencode

from cluster import dra
from cluster.decode import quota_refusal
from fleet.membership import pool_of
from portal.vocabulary.quantity import QuantityError, parse_quantity

_HEAD = re.compile(r"0/(\d+) nodes are available: (.*?)\.(?: no new claims| preemption:|\s*$|$)")
_GROUP = re.compile(r"(\d+) (.+)")
_KUEUE_SHORT = re.compile(r"insufficient unused quota for (\S+) in flavor (\S+), (\S+) more needed")


def kueue_short(message: str) -> bool:
    """Kueue's message says the workload's queue lacks unused quota for it now."""
    return bool(_KUEUE_SHORT.search(message))


_KUEUE_MAX = re.compile(
    r"insufficient quota for (\S+) in flavor (\S+)(?:, previously considered podsets requests \((\S+)\) "
    r"\+ current podset request \((\S+)\) > maximum capacity \((\S+)\)|, request > maximum capacity "
    r"\((\S+) > (\S+)\)| in ClusterQueue)"
)
_KUEUE_UNCOVERED = re.compile(r"resource (\S+) unavailable in ClusterQueue")
_KUEUE_FLAVOR_MISMATCH = re.compile(
    r"flavor (\S+) doesn't match node affinity|untolerated taint (.+?) in flavor ([^\s,;]+)"
)
_KUEUE_PREEMPTING = re.compile(r"Pending the preemption of (\d+) workload")


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
    """What the explainer needs to know about one cluster's fleet (``cluster``: its name,
    which the fix links carry, so a change is asked for on that cluster's nodes)."""

    offered: Mapping[str, int]  # resource -> allocatable across the fleet
    free: Mapping[str, int]  # resource -> allocatable minus allocated
    offered_by_node: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    intended: Mapping[str, str] = field(default_factory=dict)  # node -> pool's intended config
    promised_by_intended: Mapping[str, Mapping[str, int]] = field(
        default_factory=dict
    )  # node -> resources
    current_config: Mapping[str, str] = field(default_factory=dict)
    drift_since: Mapping[str, str] = field(default_factory=dict)  # node -> "Nov 30, 10:42 UTC"
    changed_by: Mapping[str, str] = field(default_factory=dict)  # node -> who set mig.config
    changing: Mapping[str, int] = field(default_factory=dict)  # node -> running request id
    tainted: Sequence[str] = ()  # "key=value:Effect on node-a, node-b"
    cordoned: Sequence[str] = ()  # nodes marked unschedulable
    cluster: str = ""  # the cluster's name ("": the only one)

    def new_change(self, **query: str) -> str:
        """The address of the MIG change form, on this view's cluster."""
        on = {"cluster": self.cluster} if self.cluster else {}
        return f"/changes/new/?{urlencode({**on, **query})}" if on or query else "/changes/new/"

    @cached_property
    def largest(self) -> Mapping[str, int]:
        """resource -> the most one node offers (computed once per view)."""
        most: dict[str, int] = {}
        for per in self.offered_by_node.values():
            for resource, count in per.items():
                if count > most.get(resource, 0):
                    most[resource] = count
        return most

    @cached_property
    def offering(self) -> Mapping[str, frozenset[str]]:
        """resource -> the nodes offering some of it (computed once per view, not once per
        pod: a view lives as long as the fleet does not change)."""
        nodes: dict[str, set[str]] = {}
        for node, per in self.offered_by_node.items():
            for resource, count in per.items():
                if count > 0:
                    nodes.setdefault(resource, set()).add(node)
        return {resource: frozenset(names) for resource, names in nodes.items()}

    @cached_property
    def drifted(self) -> Mapping[str, Sequence[str]]:
        """resource -> the nodes (by name) that would offer it on their pool's layout and are
        on another one (computed once per view)."""
        nodes: dict[str, list[str]] = {}
        for node, promised in sorted(self.promised_by_intended.items()):
            if self.current_config.get(node) != self.intended.get(node):
                for resource, count in promised.items():
                    if count:
                        nodes.setdefault(resource, []).append(node)
        return nodes


@dataclass
class Explanation:
    cause: str
    next_step: str
    action: dict[str, str] | None = None  # {"label", "url"}
    evidence: list[str] = field(default_factory=list)
    topic: str = ""  # the fault table's entry (gpus.knowledge)
    belongs_to: str = ""  # "workload W in queue Q": what a pod runs for
    never: str = ""  # why waiting alone never starts it ("it can never fit because ..."), if so

    def key(self) -> tuple[Any, ...]:
        """What it says, as a value: two explanations with the same key read the same."""
        action = tuple(sorted((self.action or {}).items()))
        evidence = tuple(self.evidence)
        return (
            self.cause,
            self.next_step,
            action,
            evidence,
            self.topic,
            self.belongs_to,
            self.never,
        )


def _joined(parts: Sequence[Explanation], evidence: list[str]) -> Explanation:
    """Several causes hold at once: all of them, in order, with the first action."""
    steps: list[str] = []
    for part in parts:
        if part.next_step not in steps:
            steps.append(part.next_step)
    return Explanation(
        " ".join(p.cause for p in parts),
        " ".join(steps),
        next((p.action for p in parts if p.action), None),
        evidence,
        topic=next((p.topic for p in parts if p.topic), ""),
        never=next((p.never for p in parts if p.never), ""),
    )


GPU_PREFIX = "nvidia.com/"


def _short(resource: str) -> str:
    return resource.removeprefix(GPU_PREFIX)


def explain_pod(
    *,
    namespace: str,
    name: str,
    requests: Mapping[str, int],
    message: str,
    fleet: FleetView,
    quota: Mapping[str, tuple[int, int]] | None = None,
    node_name: str = "",
    defaulted: Sequence[str | Mapping[str, Any]] = (),
    claims: Sequence[tuple[str, dra.ClaimVerdict]] = (),
) -> Explanation:
    """A Pending pod: ``message`` is the scheduler's; ``quota`` maps a resource to the
    namespace quota's (hard, used). The first cause that holds, in the scheduler's order:
    too few of a GPU resource, then taints, the node selector, cordoned nodes. A pod the
    scheduler already bound to a node waits on that node, not on the scheduler. ``defaulted``
    names the GPU resources the namespace's LimitRange added (the pod did not ask), per
    container (``{"container", "resource", "amount"}``, as the poll keeps them; a bare
    resource name: the whole pod's): when the pod waits for one of those, that is the
    cause. ``claims``: (claim name, why it is not allocated) of its DRA claims the scheduler
    has not allocated (``cluster.dra.claim_verdict``), the cause when the scheduler says it
    cannot allocate them."""
    evidence = [message] if message else []
    if claims and not node_name:
        said = explain_claims(namespace, name, claims, message, evidence)
        if said is not None:
            return said
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
    if any(_resource_of(d) in verdict.insufficient for d in defaulted):
        return _limit_range_added(namespace, requests, defaulted, evidence)
    return _short_of(verdict, requests, fleet, evidence) or _placement(
        verdict, fleet, evidence, quota, requests
    )


def _short_of(
    verdict: SchedulerVerdict,
    requests: Mapping[str, int],
    fleet: FleetView,
    evidence: list[str],
) -> Explanation | None:
    """Every resource the scheduler found too little of, explained (not the first only):
    first whether any node offers all the GPU resources the pod asks for together."""
    short = sorted(verdict.insufficient.items(), key=lambda item: (-item[1], item[0]))
    gpu = {r: requests.get(r, 0) for r, _ in short if r.startswith(GPU_PREFIX)}
    if len(gpu) > 1 and all(gpu.values()):
        together = _offered_together(gpu, fleet, evidence)
        if together is not None:
            return together
    parts = []
    for resource, count in short:
        if resource.startswith(GPU_PREFIX):
            found = _insufficient(resource, requests.get(resource, 0), fleet, evidence)
        else:
            found = Explanation(
                f"{count} node(s) have too little free {resource} for it.",
                f"Ask for less {resource}, or wait for running pods to finish.",
                None,
                evidence,
            )
        if found is not None:
            parts.append(found)
    if len(parts) > 1:
        return _joined(parts, evidence)
    return parts[0] if parts else None


def _offered_together(
    wanted: Mapping[str, int], fleet: FleetView, evidence: list[str]
) -> Explanation | None:
    """A pod asking for several GPU resources needs one node with all of them (a whole GPU
    and a MIG slice, two MIG profiles): None when some node has them all."""
    if not fleet.offered_by_node or any(
        all(per.get(r, 0) > 0 for r in wanted) for per in fleet.offered_by_node.values()
    ):
        return None
    names = " and ".join(wanted)
    asks = " and ".join(f"{n} {_short(r)}" for r, n in wanted.items())
    return Explanation(
        f"No node offers {names} together: the pod asks for {asks} on one node, and each node "
        "has only some of them.",
        "Ask for one kind only (whole GPUs or one MIG profile); if the pod's spec asks for one "
        "kind, look for a default that adds the other (the namespace's LimitRange).",
        None,
        evidence,
        topic="mig-mismatch",
        never=f"it can never fit because no node offers {names} together",
    )


def _resource_of(defaulted: str | Mapping[str, Any]) -> str:
    return defaulted if isinstance(defaulted, str) else str(defaulted.get("resource", ""))


def _limit_range_added(
    namespace: str,
    requests: Mapping[str, int],
    defaulted: Sequence[str | Mapping[str, Any]],
    evidence: list[str],
) -> Explanation:
    """A pod that waits for a device the namespace's LimitRange gave it (a default, or a
    ``max`` the API server stored as the default)."""
    per_container = [d for d in defaulted if not isinstance(d, str) and d.get("amount")]
    if any(not d.get("only") for d in per_container):
        return _limit_range_added_to(namespace, requests, per_container, evidence)
    added = {r: requests.get(r, 0) for r in map(_resource_of, defaulted) if requests.get(r, 0)}
    asked = {r: n for r, n in requests.items() if r not in added}
    also = _whole_gpu_too(added, asked)
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


def _whole_gpu_too(added: Mapping[str, int], asked: Mapping[str, int]) -> str:
    """What to add when a LimitRange gave a whole GPU to a pod that asks for MIG slices."""
    if "nvidia.com/gpu" in added and any(r.startswith("nvidia.com/mig-") for r in asked):
        return " A MIG change alone will not start it: it needs a whole GPU as well."
    return ""


def _limit_range_added_to(
    namespace: str,
    requests: Mapping[str, int],
    defaulted: Sequence[Mapping[str, Any]],
    evidence: list[str],
) -> Explanation:
    """As :func:`_limit_range_added`, said of the containers the LimitRange defaulted (the
    API server's annotation names them): the others ask for what they ask, and the opt-out
    goes into the defaulted containers alone."""
    by_container: dict[str, dict[str, int]] = {}
    for item in defaulted:
        kind = "init container" if item.get("init") else "container"
        mine = by_container.setdefault(f"{kind} {item['container']}", {})
        mine[str(item["resource"])] = int(item["amount"])
    added: dict[str, int] = {}
    for mine in by_container.values():
        for resource, amount in mine.items():
            added[resource] = added.get(resource, 0) + amount
    asked = {r: n - added.get(r, 0) for r, n in requests.items() if n - added.get(r, 0) > 0}
    gave = " and ".join(f"{who} {_amounts(mine)}" for who, mine in by_container.items())
    if asked:
        total = {r: requests.get(r, 0) for r in added}
        wants = f"the pod asks for {_amounts(asked)} itself, {_amounts(total)} in all"
    else:
        wants = "it asks for no GPU itself"
    also = _whole_gpu_too(added, asked)
    optout = " and ".join(
        f"{', '.join(f'{r}: 0' for r in sorted(mine))} in the limits of {who}"
        for who, mine in by_container.items()
    )
    return Explanation(
        f"The LimitRange of {namespace} gave {gave} it did not ask for ({wants}), and no "
        f"node has that free.{also}",
        f"Set {optout}, or ask a platform admin to take the default out of {namespace}'s "
        "LimitRange (a max alone becomes the default too).",
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
            never=f"it can never fit because it asks for {wanted} {_short(resource)} on one node "
            f"and the largest node offers {biggest}",
        )
    if offered and free >= wanted:
        return None
    lead = _lead(resource, offered, free, wanted)
    drifted = fleet.drifted.get(resource, ())
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
            "url": fleet.new_change(nodes=node, target_config=fleet.intended[node]),
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
        {"label": "Ask for a MIG change", "url": fleet.new_change()},
        evidence,
        topic="mig-mismatch" if "mig-" in resource else "insufficient-gpu",
        never=f"it can never fit because no node offers {resource}",
    )


def _placement(
    verdict: SchedulerVerdict,
    fleet: FleetView,
    evidence: list[str],
    quota: Mapping[str, tuple[int, int]] | None,
    requests: Mapping[str, int] | None = None,
) -> Explanation:
    """Nodes with the resources exist, but the pod may not go there: the nodes that offer
    what it asks for are cordoned, or carry taints it does not tolerate, or its selector
    matches none."""
    wanted = [r for r, n in (requests or {}).items() if n and r.startswith(GPU_PREFIX)]
    offering = (
        sorted(frozenset.intersection(*(fleet.offering.get(r, frozenset()) for r in wanted)))
        if verdict.unschedulable and wanted
        else []
    )
    if offering and set(offering) <= set(fleet.cordoned):
        return Explanation(
            f"Every node that offers {' and '.join(wanted)} is cordoned ({', '.join(offering)}).",
            "It is placed when they are uncordoned: wait for the maintenance or MIG change on "
            "them to finish (the Fleet page shows why they are cordoned).",
            None,
            evidence,
            topic="pod-pending",
        )
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
            never="it can never start as it is: no node matches its node selector or affinity",
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


def explain_create_failure(
    *,
    namespace: str,
    kind: str,
    name: str,
    message: str,
    observed: Mapping[str, Any] | None = None,
) -> Explanation:
    """A controller (a Job, a ReplicaSet) whose pods the API server refuses to create.

    The refusal's numbers are those of its moment (the event keeps the first message while
    its count grows): with ``observed``, the ResourceQuota's status as last polled, the
    sentence counts what is in use and allowed now, as the quota's bars on the same page do;
    the refusal stays in the evidence as the cluster said it."""
    evidence = [message]
    quota = quota_refusal(message)
    if quota:
        requested, used, limited = quota.requested, quota.used, quota.limited
        if observed is not None:
            used = {**used, **(observed.get("used") or {})}
            limited = {k: (observed.get("hard") or {}).get(k, v) for k, v in limited.items()}
        never = _never_fits(kind, name, namespace, quota.quota, requested, limited, evidence)
        if never is not None:
            return never
        parts = [
            f"{limited[k]} {k} in {namespace}, {used.get(k, '0')} are in use and a new pod asks "
            f"for {requested.get(k, '?')}"
            for k in sorted(limited)
        ]
        return Explanation(
            f"{kind} {name} cannot create its pods: quota {quota.quota} allows "
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
        never=f"it can never fit because each pod asks for {parts} (quota {quota})",
    )


def _lead(resource: str, offered: int, free: int, wanted: int) -> str:
    if not offered:
        return f"No node offers {resource}: "
    return f"All {offered} {_short(resource)} in the fleet are in use ({free} free, the pod needs {wanted}): "


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


@dataclass(frozen=True)
class Waiting:
    """How long a workload has waited and what Kueue did to it before (its Workload's
    status), for the explanation of one that is not admitted."""

    waited_s: int | None = None  # since its creation, or its latest requeue
    pending: int | None = None  # pending workloads in its ClusterQueue (status)
    evictions: int = 0
    evicted_reason: str = ""  # the last eviction's (PodsReadyTimeout, Preempted, ...)
    evicted: bool = False  # evicted and not admitted since
    requeue_in_s: int | None = None  # what is left of its back-off before it is back in line


GRACE_S = 60  # Kueue looks at a new workload within seconds; after this, silence means more


def _duration(seconds: int) -> str:
    if seconds < 120:
        return f"{seconds} s"
    if seconds < 7200:
        return f"{seconds // 60} min"
    return f"{seconds // 3600} h {seconds % 3600 // 60} min"


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
    waiting: Waiting | None = None,
) -> Explanation:
    """A Kueue workload that is not admitted (its Job stays suspended); ``position`` is its
    0-based place in its ClusterQueue (Kueue's visibility API), when known; ``waiting``
    says how long it waits and whether Kueue evicted it before."""
    waiting = waiting or Waiting()
    evicted = _evicted(namespace, name, message, waiting)
    if evicted is not None:
        return evicted
    if not message and (waiting.waited_s or 0) >= GRACE_S:
        return _silent(queue, cluster_queue, position, waiting)
    why = _explain_workload(
        namespace=namespace, name=name, queue=queue, reason=reason, message=message
    )
    if position is not None:
        where = f" for {cluster_queue}" if cluster_queue else ""
        why.cause = f"{why.cause} It is {_ordinal(position + 1)} in line{where}."
    if waiting.evictions:
        why.cause = f"{why.cause} {_evicted_before(waiting)}"
    return why


_EVICTED_WHY = {
    "PodsReadyTimeout": "its pods were not ready within its PodsReady timeout (waitForPodsReady)",
    "Preempted": "it was preempted to make room for other work",
    "ClusterQueueStopped": "its ClusterQueue was stopped",
    "LocalQueueStopped": "its LocalQueue was stopped",
    "NodeFailures": "a node it ran on failed",
}


def _times(n: int) -> str:
    return "once" if n == 1 else f"{n} times"


def _evicted_before(waiting: Waiting) -> str:
    why = _EVICTED_WHY.get(waiting.evicted_reason, "")
    return f"Kueue evicted it {_times(waiting.evictions)} before{': ' + why if why else ''}."


def _evicted(namespace: str, name: str, message: str, waiting: Waiting) -> Explanation | None:
    """A workload Kueue admitted, then evicted: why, how often, and whether it is back in
    line; None when the eviction is not what holds it now."""
    evidence = [message] if message else []
    if "maximum number of re-queuing retries" in message:
        return Explanation(
            f"Kueue deactivated it after evicting it {_times(waiting.evictions or 1)}: it reached "
            "the re-queuing limit (waitForPodsReady.requeuingStrategy.backoffLimitCount) and "
            "is not admitted again.",
            "Find out why its pods do not start (kubectl -n "
            f"{namespace} describe workload {name} and the pods' events), fix it, then submit "
            "the job again.",
            None,
            evidence,
            never="Kueue deactivated it: it is not admitted again unless it is submitted anew",
        )
    if not message.startswith("Exceeded the PodsReady timeout"):
        return None  # not evicted, or requeued and waiting for quota again (that message says why)
    if waiting.requeue_in_s:
        back = f"it goes back in line in {_duration(waiting.requeue_in_s)}, when its back-off ends"
    else:
        back = "it is requeued"
    return Explanation(
        "Kueue evicted it after its pods were not ready within its PodsReady timeout "
        f"(waitForPodsReady); {back} (evicted {_times(waiting.evictions or 1)}).",
        "Find out why its pods did not start in time (an image that cannot be pulled, a node "
        "selector or toleration no node matches, a resource no node has: kubectl -n "
        f"{namespace} get events); Kueue admits it again when its quota is free.",
        None,
        evidence,
        topic="pod-pending",
    )


def _silent(queue: str, cluster_queue: str, position: int | None, waiting: Waiting) -> Explanation:
    """Queued for a while and Kueue wrote no reason (BestEffortFIFO does not write one for
    every workload it passes over): how long, and behind how many."""
    waited = _duration(waiting.waited_s or 0)
    where = f"ClusterQueue {cluster_queue}" if cluster_queue else f"queue {queue}"
    if position is not None:
        line = (
            f"is first in line in {where}"
            if position == 0
            else f"is queued behind {position} other{'s' if position != 1 else ''} in {where}"
        )
        cause = f"Kueue wrote no reason for it; it has waited {waited} and {line}."
    elif waiting.pending == 1:
        cause = (
            f"Kueue wrote no reason for it; it has waited {waited}, the only pending workload "
            f"in {where}."
        )
    elif waiting.pending:
        cause = (
            f"Kueue wrote no reason for it; it has waited {waited}, one of {waiting.pending} "
            f"pending workloads in {where}."
        )
    else:
        cause = f"Kueue wrote no reason for it in the {waited} it has waited in {where}."
    if waiting.evictions:
        cause = f"{cause} {_evicted_before(waiting)}"
    return Explanation(
        cause,
        "Kueue admits it when the workloads ahead of it are admitted or finish and its quota "
        "is free: compare the queue's quota with what is in use on the Queues page.",
        {"label": "Queues", "url": "/queues/"},
        [],
        topic="queue-quota",
    )


def explain_admitted(
    *,
    cluster_queue: str,
    pod: str = "",
    pod_why: Explanation | None = None,
    pods_ready: bool = True,
    admitted_s: int | None = None,
) -> Explanation | None:
    """An admitted workload whose pods do not run: Kueue did its part, a stuck pod's
    problem is the workload's. None when nothing is in its way (its pods are ready, or it
    was admitted a moment ago)."""
    where = f" into ClusterQueue {cluster_queue}" if cluster_queue else ""
    if pod_why is not None:
        return Explanation(
            f"Kueue admitted it{where}, but its pod {pod} does not run: {pod_why.cause}",
            pod_why.next_step,
            pod_why.action,
            pod_why.evidence,
            topic=pod_why.topic,
            never=pod_why.never,
        )
    if pods_ready or (admitted_s or 0) < GRACE_S:
        return None
    return Explanation(
        f"Kueue admitted it{where} {_duration(admitted_s or 0)} ago, and its pods are not all "
        "ready yet.",
        "Look at its pods (kubectl get pods -l kueue.x-k8s.io/podset): Kueue evicts and requeues "
        "the workload if they are not ready within its PodsReady timeout (waitForPodsReady).",
        None,
        ["Not all pods are ready or succeeded"],
        topic="pod-pending",
    )


def _kueue_quota(queue: str, message: str, evidence: list[str]) -> Explanation | None:
    """Kueue's flavor assignment: every resource and flavor it names (it joins them with
    ", "), short of unused quota or beyond what the queue can ever give."""
    short = _KUEUE_SHORT.findall(message)
    if short:
        first = short[0]
        if len(short) == 1:
            cause = f"Queue {queue} has no unused quota for {first[0]} in flavor {first[1]}: {first[2]} more needed."
        else:
            cause = (
                f"Queue {queue} has no unused quota for "
                + ", nor for ".join(f"{r} in flavor {f} ({n} more needed)" for r, f, n in short)
                + "."
            )
        preempting = _KUEUE_PREEMPTING.search(message)
        step = (
            f"Kueue is preempting {preempting.group(1)} workload(s) to make room: it is "
            "admitted once they have stopped."
            if preempting
            else "It is admitted when other workloads finish; ask for more queue quota if this "
            "is normal now."
        )
        return Explanation(
            cause,
            step,
            {"label": "Ask for quota", "url": "/quota/new/"},
            evidence,
            topic="queue-quota",
        )
    maximum = [
        (m.group(1), m.group(2), m.group(5) or m.group(7)) for m in _KUEUE_MAX.finditer(message)
    ]
    if maximum:
        if len(maximum) == 1:
            resource, flavor, limit = maximum[0]
            cap = f" (at most {limit})" if limit else ""
            cause = (
                f"The workload asks for more {resource} in flavor {flavor} than queue {queue} "
                f"can ever give{cap}."
            )
            never = f"it can never fit because it asks for more {resource} than queue {queue} can ever give{cap}"
        else:
            cause = (
                "The workload asks for more "
                + ", and more ".join(
                    f"{r} in flavor {f}" + (f" (at most {n})" if n else "") for r, f, n in maximum
                )
                + f", than queue {queue} can ever give."
            )
            never = f"it can never fit because it asks for more than queue {queue} can ever give"
        return Explanation(
            cause,
            "Make it smaller, or ask for a larger nominal quota or borrowing limit.",
            {"label": "Ask for quota", "url": "/quota/new/"},
            evidence,
            topic="queue-quota",
            never=never,
        )
    return None


def _explain_workload(
    *,
    namespace: str,
    name: str,
    queue: str,
    reason: str,
    message: str,
) -> Explanation:
    evidence = [message] if message else []
    quota = _kueue_quota(queue, message or "", evidence)
    if quota is not None:
        return quota
    mismatch = _KUEUE_FLAVOR_MISMATCH.findall(message or "")
    if mismatch:
        parts = [
            f"flavor {affinity} does not match its node selector or affinity"
            if affinity
            else f"its pods do not tolerate taint {taint} of flavor {flavor}"
            for affinity, taint, flavor in mismatch
        ]
        return Explanation(
            f"No flavor of queue {queue} fits the workload: {'; '.join(parts)}.",
            "Remove the node selector or add the toleration the flavor needs, or submit to a "
            "queue whose flavors match the job.",
            None,
            evidence,
            topic="pod-pending",
            never=f"it can never start as it is: no flavor of queue {queue} fits it",
        )
    if "didn't satisfy LimitRange constraints" in (message or ""):
        return Explanation(
            f"Kueue refuses it: its containers break the LimitRange of namespace {namespace}.",
            "Change the job's requests and limits to what the namespace's container limits "
            "allow (on the team's page).",
            None,
            evidence,
            never=f"it can never start as it is: it breaks the LimitRange of {namespace}",
        )
    uncovered = _KUEUE_UNCOVERED.search(message or "")
    if uncovered:
        return Explanation(
            f"Queue {queue}'s ClusterQueue does not cover {uncovered.group(1)} at all.",
            "Ask a platform admin to add the resource to the ClusterQueue.",
            None,
            evidence,
            never=f"it can never fit because its ClusterQueue does not cover {uncovered.group(1)}",
        )
    if "doesn't exist" in (message or ""):
        return Explanation(
            f"{message.rstrip('.')} in namespace {namespace}.",
            "Use one of the namespace's LocalQueues in the job's kueue.x-k8s.io/queue-name label.",
            None,
            evidence,
            never=f"it can never start as it is: its queue {queue} does not exist",
        )
    if "namespace doesn't match ClusterQueue selector" in (message or ""):
        return Explanation(
            f"Namespace {namespace} may not use the ClusterQueue behind {queue}.",
            "Ask a platform admin to give the namespace a LocalQueue on it.",
            None,
            evidence,
            never=f"it can never start as it is: namespace {namespace} may not use that queue",
        )
    if "inactive" in (message or "") or "stopped" in (message or ""):
        return Explanation(
            f"{message.rstrip('.')}.",
            "Ask a platform admin why the queue is held.",
            None,
            evidence,
            never="its queue admits nothing while it is stopped or inactive",
        )
    if not message:
        return Explanation(
            "Kueue has not looked at this workload yet.", "Wait a few seconds.", None, []
        )
    return Explanation("Kueue has not admitted it.", "Read Kueue's message below.", None, evidence)


def in_utc(moment: dt.datetime) -> str:
    """A moment as the explainer's sentences write it: "Dec 2, 00:54 UTC"."""
    t = moment.astimezone(dt.UTC)
    return f"{t:%b} {t.day}, {t:%H:%M} UTC"


def fleet_view(
    nodes: Sequence[Any],
    pods: Sequence[Any],
    pools: Sequence[Any],
    drift: Sequence[Any],
    changing: Mapping[str, int],
    promised: Mapping[str, Mapping[str, int]],
    *,
    cluster: str = "",
) -> FleetView:
    """Build one cluster's view from its observed rows (ObservedNode, ObservedPod, NodePool,
    Drift); ``cluster``, its name, goes into the fix links."""
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
        pool = pool_of(node.labels, pools)
        if pool is not None and pool.mig_config:
            intended[node.name] = pool.mig_config
    return FleetView(
        offered=offered,
        free=free,
        offered_by_node=per_node,
        intended=intended,
        promised_by_intended={n: promised[n] for n in intended if n in promised},
        current_config={n.name: n.mig_config for n in nodes},
        drift_since={d.subject: in_utc(d.first_seen) for d in drift if d.kind == "mig_layout"},
        changed_by={
            n.name: n.mig_config_by.partition(" at ")[0]
            for n in nodes
            if getattr(n, "mig_config_by", "")
        },
        changing=changing,
        tainted=[f"{key} on {', '.join(names)}" for key, names in sorted(tainted.items())],
        cordoned=sorted(n.name for n in nodes if getattr(n, "unschedulable", False)),
        cluster=cluster,
    )


@dataclass(frozen=True)
class Pinned:
    """What Kueue's admission of a pod's workload pins it to: the flavor of each resource
    (``status.admission``), what it charged of each, and the flavors' node labels."""

    flavors: Mapping[str, str]  # resource -> flavor
    charged: Mapping[str, int]  # resource -> amount (a requested zero is 0)
    node_labels: Mapping[str, Mapping[str, str]]  # flavor -> its nodeLabels


def explain_pinned(
    *,
    requests: Mapping[str, int],
    pinned: Pinned,
    nodes: Sequence[tuple[Mapping[str, str], Mapping[str, Any]]],
    evidence: Sequence[str] = (),
) -> Explanation | None:
    """A pod Kueue pinned where it can never run: Kueue gives a requested zero a flavor too
    (``nvidia.com/mig-3g.40gb: "0"`` beside a whole GPU), and the Job's pods get the node
    labels of every flavor assigned (the first flavor's label where two disagree, in an
    order Kueue does not fix), which no node carrying them offers what the pod asks for.
    None when some node, in some such order, would do. ``nodes``: (labels, allocatable)."""
    zeros = sorted(r for r in pinned.flavors if not pinned.charged.get(r, 0))
    wanted = sorted(r for r, n in requests.items() if n > 0)
    order = list(dict.fromkeys(pinned.flavors[r] for r in sorted(pinned.flavors)))
    if not zeros or not wanted or len(order) < 2 or len(order) > 4:
        return None
    for flavors in itertools.permutations(order):
        selector: dict[str, str] = {}
        for flavor in flavors:
            for key, value in (pinned.node_labels.get(flavor) or {}).items():
                selector.setdefault(key, value)
        for labels, allocatable in nodes:
            if all(labels.get(k) == v for k, v in selector.items()) and all(
                _count(allocatable.get(r)) > 0 for r in wanted
            ):
                return None
    zero = zeros[0]
    by = pinned.flavors[zero]
    others = sorted({pinned.flavors[r] for r in wanted if r in pinned.flavors} - {by})
    beside = f", beside flavor {', '.join(others)} for its {', '.join(wanted)}" if others else ""
    asks = " and ".join(f"{requests[r]} {_short(r)}" for r in wanted)
    return Explanation(
        f"Kueue assigned flavor {by} for its {zero}: 0 request{beside}: its pods must go to "
        f"nodes with the labels of both, and no such node offers {asks}. It can never run "
        "there.",
        f'Take {zero}: "0" out of the workload\'s containers (Kueue gives a requested zero a '
        "flavor, with that flavor's node labels), then submit it again.",
        None,
        list(evidence),
        topic="pod-pending",
        never=f"it can never run because its {zero}: 0 request pins it to the nodes of "
        f"flavor {by}, which offer no {', '.join(_short(r) for r in wanted)}",
    )


def _count(value: Any) -> int:
    try:
        return int(str(value or "0"))
    except ValueError:
        return 0


@dataclass(frozen=True)
class Undercharged:
    """An admitted workload Kueue charges less of a GPU resource than its pods ask for (its
    Workload's podSets carry requests a LimitRange's ``defaultRequest`` set below the
    limits: Kueue charges requests, the pods ask for their limits as requests)."""

    namespace: str
    name: str
    resource: str
    charged: int
    asked: int


def _plural(n: int, one: str, many: str) -> str:
    return one if n == 1 else many


def undercharged_note(held: Undercharged) -> str:
    """What to say on the workload itself (its own team reads it)."""
    short = _short(held.resource)
    return (
        f"Kueue charged it {held.charged} {short} while its pods ask for {held.asked}: its "
        f"queue counts {held.asked - held.charged} fewer in use than the nodes hold, and other "
        "work is let in that then waits for nodes."
    )


def explain_undercharged(held: Undercharged, why: Explanation | None) -> Explanation:
    """An admitted workload charged less than its pods ask: the note, before what else is
    said of it (a stuck pod's explanation)."""
    note = undercharged_note(held)
    fix = (
        "Set the containers' requests equal to their limits (Kueue charges requests; the "
        f"LimitRange of {held.namespace} sets a request below the limit when only a limit is "
        "written), or ask a platform admin to take that default out."
    )
    if why is None:
        return Explanation(note, fix, None, [], topic="pod-pending")
    return replace(why, cause=f"{note} {why.cause}", next_step=f"{fix} {why.next_step}")


def explain_taken(
    why: Explanation, *, wanted: Mapping[str, int], admitted: bool, held: Sequence[Undercharged]
) -> Explanation:
    """A pod waiting for busy GPUs while admitted workloads hold more of them than Kueue
    charged (the queues' usage is what Kueue charged, so they let in more than the nodes
    hold): who is never named, only how many, how much charged and how much asked."""
    for resource in sorted(r for r, n in wanted.items() if n > 0):
        mine = [h for h in held if h.resource == resource]
        if not mine:
            continue
        charged, asked = sum(h.charged for h in mine), sum(h.asked for h in mine)
        short = _short(resource)
        lead = "Kueue admitted it, but" if admitted else "Its queue admitted it, but"
        workloads = _plural(len(mine), "workload is", "workloads are")
        their = _plural(len(mine), "its pods ask", "their pods ask")
        return replace(
            why,
            cause=(
                f"{lead} {len(mine)} admitted {workloads} charged {charged} {short} by Kueue "
                f"while {their} for {asked}: the queues count {asked - charged} fewer "
                f"{short} in use than the nodes hold. {why.cause}"
            ),
            next_step=(
                f"{why.next_step} Ask a platform admin about workloads whose requests are below "
                "their limits: Kueue charges requests, and a LimitRange's defaultRequest sets "
                "them below the limits when only limits are written."
            ),
        )
    return why


# ---------------------------------------------------------------- DRA claims
_CANNOT_ALLOCATE = "cannot allocate all claims"


def explain_claims(
    namespace: str,
    name: str,
    claims: Sequence[tuple[str, dra.ClaimVerdict]],
    message: str,
    evidence: list[str],
) -> Explanation | None:
    """A pod waiting for its DRA claims, in the first claim's cause: a class the cluster
    does not have, no device matching, fewer matching than asked, every matching device
    taken, or the counters of partitionable GPUs held by MIG devices allocated on them.
    None when the scheduler has not said it cannot allocate them (another cause comes
    first) or the reason cannot be read."""
    said = [c for c in claims if c[1].reason not in (dra.FITS, dra.UNKNOWN)]
    if not said:
        return None
    claim, verdict = said[0]
    if verdict.reason == dra.QUOTA:
        return _quota_used_up(namespace, claim, verdict, evidence)
    if verdict.reason == dra.POLICY:
        return _policy_closes(namespace, claim, verdict, evidence)
    unknown_class = verdict.reason == dra.CLASS_UNKNOWN
    if _CANNOT_ALLOCATE not in message and not (unknown_class and message):
        return None
    asks = f"the pod's claim {claim} (device class {verdict.device_class})"
    what = verdict.what or "device"
    fix = f"kubectl -n {namespace} get resourceclaim {claim} -o yaml"
    if unknown_class:
        have = ", ".join(verdict.classes) or "none"
        return Explanation(
            f"The cluster has no device class {verdict.device_class}, which {asks.replace(f' (device class {verdict.device_class})', '')} asks for.",
            f"Ask for one of the device classes the cluster has ({have}) in the claim or its "
            "template, or ask a platform admin to install the DRA driver that defines it.",
            None,
            evidence,
            topic="dra-claim",
        )
    if verdict.reason == dra.NO_MATCH:
        return Explanation(
            f"No device published through DRA matches {asks}: no node offers what its "
            "selectors ask for.",
            f"Ask for a device the fleet has (the node pages list the DRA devices; {fix} shows "
            "the selectors), or ask a platform admin for such GPUs.",
            None,
            evidence,
            topic="dra-claim",
            never="no device in the cluster matches its claim",
        )
    if verdict.reason == dra.TOO_FEW:
        return _too_few(asks, what, fix, verdict, evidence)
    if verdict.reason == dra.APART:
        return _apart(namespace, claim, verdict, evidence)
    if verdict.reason == dra.TAINTED:
        return _tainted(asks, what, verdict, evidence)
    if verdict.reason == dra.COUNTERS:
        return Explanation(
            f"The {what} that {asks} matches {'is' if verdict.matching == 1 else 'are'} free "
            "but cannot be had: MIG devices allocated on the same GPU hold its shared "
            "counters (memory slices, multiprocessors).",
            "It starts when those MIG devices are released; a MIG profile that fits in what "
            "the GPU has left would start now (the node page shows the counters left).",
            None,
            evidence,
            topic="dra-claim",
        )
    return _all_taken(asks, what, verdict, evidence)


def _taint_source(taint: dra.Taint) -> str:
    """Who sets a device taint, by its key (the NVIDIA DRA driver's health check,
    ``docs/reference/dra.md``)."""
    if taint.key == "gpu.nvidia.com/xid":
        return f"the GPU driver's health check set it: the GPU reported the fatal XID error {taint.value}"
    if taint.key == "gpu.nvidia.com/gpu-lost":
        return "the GPU driver's health check set it: the driver lost the GPU"
    return "the device's driver or a platform admin's DeviceTaintRule set it"


def _tainted(asks: str, what: str, verdict: dra.ClaimVerdict, evidence: list[str]) -> Explanation:
    """Matching devices would serve the claim but for taints it does not tolerate: the
    scheduler leaves such devices out (KEP-5055) and says only that it cannot allocate."""
    where, taint = verdict.taints[0]
    more = len(verdict.taints) - 1
    others = f", and {more} more {_plural(more, 'device', 'devices')} so" if more > 0 else ""
    return Explanation(
        f"{_cap(asks)} would get a free {what}, but the free ones are tainted and the claim "
        f"does not tolerate the taint: {where} has {taint.text}{others} ({_taint_source(taint)}).",
        "It starts when a platform admin clears the taint once the GPU is sound again (the "
        "driver checks its GPUs anew when its kubelet plugin restarts), or when a matching "
        "device that is not tainted is released; tolerate the taint in the claim only to run "
        "on the device as it is.",
        None,
        evidence,
        topic="dra-claim",
    )


def _all_taken(asks: str, what: str, verdict: dra.ClaimVerdict, evidence: list[str]) -> Explanation:
    """No node has enough of the matching devices free: every one is taken, or those free
    are spread over nodes with fewer than the claim asks for each."""
    if verdict.matching - verdict.taken >= verdict.wanted:
        return Explanation(
            f"{_cap(asks)} asks for {verdict.wanted} {what} on one node (a claim's devices "
            f"are all on the node its pod runs on), and no node has that many free: at most "
            f"{verdict.free_on_a_node} on any one node ({verdict.taken} of "
            f"{verdict.matching} allocated in the whole cluster).",
            f"It starts when one node has {verdict.wanted} free; a claim asking for fewer "
            "devices (the work split into more pods) may start sooner.",
            None,
            evidence,
            topic="dra-claim",
        )
    return Explanation(
        f"Every {what} that {asks} matches is allocated to other claims "
        f"({verdict.taken} of {verdict.matching}).",
        "It starts when one of them is released; a smaller device (a MIG profile) may be "
        "free sooner.",
        None,
        evidence,
        topic="dra-claim",
    )


def _too_few(
    asks: str, what: str, fix: str, verdict: dra.ClaimVerdict, evidence: list[str]
) -> Explanation:
    """Fewer devices match on any one node than the claim asks for: a claim's devices are
    all on one node, so the fleet's sum does not serve it."""
    if verdict.on_a_node >= verdict.matching:
        return Explanation(
            f"{_cap(asks)} asks for {verdict.wanted} devices, and only "
            f"{verdict.matching} {what} match in the whole cluster.",
            f"Ask for at most {verdict.matching} in the claim ({fix}).",
            None,
            evidence,
            topic="dra-claim",
            never=f"only {verdict.matching} devices match its claim",
        )
    return Explanation(
        f"{_cap(asks)} asks for {verdict.wanted} devices on one node (a claim's devices are "
        f"all on the node its pod runs on), and at most {verdict.on_a_node} {what} match on "
        f"any one node ({verdict.matching} in the whole cluster).",
        f"Ask for at most {verdict.on_a_node} in the claim, and split the work into pods of "
        f"that many devices each ({fix}).",
        None,
        evidence,
        topic="dra-claim",
        never=f"no node has {verdict.wanted} devices matching its claim",
    )


def _apart(
    namespace: str, claims: str, verdict: dra.ClaimVerdict, evidence: list[str]
) -> Explanation:
    """Each of a pod's claims could be had on some node, but no node has them all."""
    return Explanation(
        f"Each of the pod's claims could be had on some node, but no node has all of them "
        f"free together ({verdict.what}): a pod's claims are all allocated on the node it "
        "runs on.",
        (
            "Split the work into pods that each ask for what one node has (the node pages "
            "list each node's DRA devices)."
            if verdict.never
            else "It starts when one node has them all free; the node pages show which "
            "devices each node has free now."
        ),
        None,
        evidence,
        topic="dra-claim",
        never="no node has every device its claims ask for" if verdict.never else "",
    )


def _quota_used_up(
    namespace: str, template: str, verdict: dra.ClaimVerdict, evidence: list[str]
) -> Explanation:
    return Explanation(
        f"The namespace's quota on device class {verdict.device_class} is used up "
        f"({verdict.taken} of {verdict.wanted} devices): the claim the pod asks for from "
        f"its template {template} cannot be made.",
        f"It is made when a claim of namespace {namespace} on that class is released; ask "
        "for more quota on the class if this is normal now.",
        None,
        evidence,
        topic="dra-claim",
    )


def _policy_closes(
    namespace: str, template: str, verdict: dra.ClaimVerdict, evidence: list[str]
) -> Explanation:
    """A governed namespace (its cluster's MIG policy, ``tenants/mig_policy.py``): the
    claim its pod's template would make is refused, either of a class the policy closes or
    of a granted one used up. Where the poll read the template (``verdict.what``: the
    classes it asks for), the one that holds is said; else both."""
    granted = [c.rsplit("=", 1) for c in verdict.classes]
    full = [c for c, amounts in granted if int(amounts.split("/")[0]) >= int(amounts.split("/")[1])]
    if verdict.what:
        return _policy_refuses_template(namespace, template, verdict, granted, full, evidence)
    if not granted:
        cause = (
            f"Namespace {namespace}'s MIG policy on this cluster grants it no MIG devices: "
            f"the API server refuses the claim the pod asks for from its template {template}."
        )
    else:
        room = "; ".join(f"{c}: {amounts.replace('/', ' of ')} in use" for c, amounts in granted)
        cause = (
            f"Namespace {namespace}'s MIG policy on this cluster allows claims of "
            f"{verdict.device_class} only ({room}): the API server refuses the claim the pod "
            f"asks for from its template {template}, "
            + (
                "of a class the policy closes (the driver's mig.nvidia.com, a profile not "
                "granted) or of a granted one used up."
                if full
                else "so its class is one the policy closes (the driver's mig.nvidia.com, "
                "a profile not granted)."
            )
        )
    use = f"use a granted class ({verdict.device_class}) in the template, or " if granted else ""
    return Explanation(
        cause,
        f"To start it, {use}ask for the profile: a platform admin proposes it on the MIG "
        "policy page and an approver decides.",
        None,
        evidence,
        topic="dra-claim",
    )


def _policy_refuses_template(
    namespace: str,
    template: str,
    verdict: dra.ClaimVerdict,
    granted: list[list[str]],
    full: list[str],
    evidence: list[str],
) -> Explanation:
    """The policy's refusal of a claim whose template the poll read: the class it asks for
    that the policy closes, else the granted class it asks for that is used up."""
    asked = verdict.what.split(", ")
    names = [c for c, _ in granted]
    closed = [c for c in asked if c not in names]
    policy = f"Namespace {namespace}'s MIG policy on this cluster"
    if closed:
        grants = f"it grants {verdict.device_class} only" if granted else "it grants no MIG device"
        return Explanation(
            f"{policy} closes device class {', '.join(closed)}, which the pod's template "
            f"{template} asks for ({grants}): the API server refuses the claim.",
            "To start it, "
            + (
                f"use a granted class ({verdict.device_class}) in the template, or "
                if granted
                else ""
            )
            + "ask for the profile: a platform admin proposes it on the MIG policy page and an "
            "approver decides.",
            None,
            evidence,
            topic="dra-claim",
        )
    used_up = [c for c in asked if c in full]
    amounts = "; ".join(f"{c}: {a.replace('/', ' of ')} in use" for c, a in granted if c in used_up)
    return Explanation(
        f"{policy} grants the class the pod's template {template} asks for, and it is used up "
        f"({amounts}): the API server refuses the claim until one of the namespace's claims of "
        "it is released.",
        f"It is made when a claim of namespace {namespace} on {', '.join(used_up)} is released; "
        "to have more at once, ask for a larger grant: a platform admin proposes it on the MIG "
        "policy page and an approver decides.",
        None,
        evidence,
        topic="dra-claim",
    )


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:]
