"""Why is it waiting, computed where it is known: after each poll of a cluster
(``loop.written``), every waiting workload, Pending pod and refused pod creation of that
cluster is explained and estimated once, on that cluster's fleet, queues and history, and
stored with its row (``explained``); the pages and the API read it (``diagnostics.selectors``)
and redact it per viewer."""

from __future__ import annotations

import datetime as dt
import functools
import hashlib
import operator
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any, NamedTuple

import orjson
from django.db.models import (
    BooleanField,
    Exists,
    ExpressionWrapper,
    F,
    JSONField,
    OuterRef,
    Q,
    Value,
)
from django.db.models.functions import JSONObject

from changes.facts import custom_configs
from changes.models import MigChangeRequest
from cluster import dra
from cluster.models import (
    Cluster,
    ObservedCreateFailure,
    ObservedDeviceClass,
    ObservedNode,
    ObservedObject,
    ObservedPod,
    ObservedPodGroup,
    ObservedResourceClaim,
    ObservedResourceSlice,
    ObservedWorkload,
)
from cluster.selectors import open_drift
from diagnostics.estimate import (
    Estimate,
    Line,
    NodeChange,
    QueueChange,
    Running,
    Runs,
    dated,
    estimate_pod,
    estimate_refused,
    estimate_workload,
)
from diagnostics.explain import (
    Explanation,
    FleetView,
    Gang,
    Pinned,
    Undercharged,
    Waiting,
    explain_admitted,
    explain_create_failure,
    explain_gang,
    explain_pinned,
    explain_pod,
    explain_taken,
    explain_undercharged,
    explain_workload,
    fleet_view,
    kueue_short,
)
from fleet.membership import pool_of
from fleet.models import NodePool
from gpus.catalog import model_for_product, promised_resources
from loop.write import write_columns
from portal.vocabulary.quantity import QuantityError, parse_quantity
from queues.models import ClusterQueue, Cohort, LocalQueue, ResourceFlavor
from queues.rules import quota_entries
from tenants import mig_policy
from tenants.rules import DEVICE_CLASS_QUOTA
from tenants.selectors import claim_templates_ask
from usage.runs import run_times

_QUOTA_NAMED = re.compile(r"exceeded quota: ([^,]+),")
CHANGING = ["approved", "running", "scheduled"]  # requests that are reconfiguring nodes
REFUSALS_KEPT = dt.timedelta(minutes=15)  # a refused creation older than this is history
# What the explanations never read of the Pending pods they explain, left in the database
# (the workloads are read as the columns of ``WorkloadRow`` alone).
UNREAD_OF_PODS = ["uid", "started_at", "owner_kind", "owner_name", "row_hash", "decoded_from"]
UNREAD_OF_PODS += ["last_changed"]


def explain_cluster(cluster_id: int, now: dt.datetime) -> int:
    """Why each waiting workload, Pending pod and recent refused creation of cluster
    ``cluster_id`` waits, and when it could start, as of ``now``: computed once per poll,
    right after the poll wrote the cluster's rows (``loop.written``), and stored with them
    (``explained``), as Kueue writes its reason into a Workload's status. A row that no
    longer waits loses its explanation. Returns how many rows were written."""
    settled = _settled(cluster_id)
    admitted = admitted_of(cluster_id)
    held = _undercharged(admitted, cluster_id)
    charged_less = {(h.namespace, h.name) for h in held}
    again = [w.pk for w in admitted if w.settled and (w.namespace, w.name) in charged_less]
    workloads = [
        WorkloadRow(*row)
        for row in ObservedWorkload.objects.on(cluster_id)
        .filter(~settled | Q(pk__in=again), finished=False)
        .order_by("admitted", "namespace", "created_at")
        .values_list(*WORKLOAD_ROW)
    ]
    pods = list(
        ObservedPod.objects.on(cluster_id)
        .filter(phase="Pending")
        .defer(*UNREAD_OF_PODS, "explained")
        .order_by("namespace", "name")
    )
    failures = list(
        ObservedCreateFailure.objects.on(cluster_id)
        .filter(last_seen__gte=now - REFUSALS_KEPT)
        .defer("explained")
        .order_by("namespace", "kind", "name")
    )
    explain(workloads, pods, failures, cluster_id=cluster_id, now=now, held=held, admitted=admitted)
    return (
        _store(ObservedWorkload, workloads, Q(finished=True), cluster_id)
        + _store(ObservedPod, pods, ~Q(phase="Pending"), cluster_id)
        + _store(ObservedCreateFailure, failures, Q(last_seen__lt=now - REFUSALS_KEPT), cluster_id)
    )


@dataclass(slots=True)
class WorkloadRow:
    """A workload the poll explains (one that waits, or is admitted and not settled), read
    as plain values, with what the explainer computes for it: ``why`` and ``estimate``. Not
    a model: a poll of the scale scenario reads 25,000 and more, and a model each cost four
    times the read itself (0.98 against 0.21 s for 25,000, the stored JSON left out)."""

    pk: int
    namespace: str
    name: str
    queue_name: str
    cluster_queue: str
    admitted: bool
    reason: str
    message: str
    requests: dict[str, Any]
    flavors: dict[str, str]
    priority: int
    created_at: dt.datetime | None
    admitted_at: dt.datetime | None
    queued_at: dt.datetime | None
    pods_ready: bool
    evictions: int
    evicted_reason: str
    evicted_at: dt.datetime | None
    requeue_at: dt.datetime | None
    position: int | None
    explained_digest: int | None
    why: Explanation | None = None
    estimate: Estimate | None = None


WORKLOAD_ROW = [f.name for f in fields(WorkloadRow)][:-2]  # the columns read, in order


class Admitted(NamedTuple):
    """An admitted workload as plain values: what the undercharge check reads of it,
    whether its explanation is settled (:func:`_settled`), and what its ClusterQueue's line
    counts of it (:class:`_Queues`: its place among what runs)."""

    namespace: str
    name: str
    requests: dict[str, Any]
    pk: int
    settled: bool | None
    queue_name: str
    cluster_queue: str
    priority: int
    position: int | None
    created_at: dt.datetime | None
    queued_at: dt.datetime | None
    admitted_at: dt.datetime | None
    admitted: bool = True


def admitted_of(cluster_id: int) -> list[Admitted]:
    """Every admitted workload of cluster ``cluster_id`` that has not finished (one query:
    the settled ones too, which are not explained again, since the undercharge check and
    the lines count them all)."""
    settled = ExpressionWrapper(_settled(cluster_id), output_field=BooleanField())
    return [
        Admitted(*row)
        for row in ObservedWorkload.objects.on(cluster_id)
        .filter(admitted=True, finished=False)
        .annotate(settled=settled)
        .values_list(*Admitted._fields[:-1])
    ]


def _settled(cluster_id: int) -> Q:
    """The admitted workloads whose stored explanation explaining them again could only
    repeat, so they are not read as models nor explained: their pods are ready and none of
    them is Pending, and nothing in their way is stored (their ClusterQueue the only word).
    What the explanation of such a workload reads is that alone (not the clock, which counts
    only while its pods are not ready, nor its queues), and whether Kueue charges it less
    than its pods ask, which the caller reads for every admitted workload."""
    stuck = ObservedPod.objects.on(cluster_id).filter(
        phase="Pending", namespace=OuterRef("namespace"), workload_name=OuterRef("name")
    )
    nothing = JSONObject(
        why=Value(None, output_field=JSONField()),
        estimate=Value(None, output_field=JSONField()),
        cluster_queue=F("cluster_queue"),
    )
    return Q(~Exists(stuck), admitted=True, pods_ready=True, explained=nothing)


def _store(model: Any, rows: Sequence[Any], done: Q, cluster_id: int) -> int:
    """Each explained row's ``explained`` and its digest, written where the digest changed
    (``write_columns``: a fixed number of statements; the stored JSON is never read back to
    compare), and the explanation of the cluster's rows that no longer wait (``done``)
    dropped."""
    changed: dict[int, tuple[dict[str, Any], int]] = {}
    for row in rows:
        stored = to_json(row)
        digest = json_digest(stored)
        if digest != row.explained_digest:
            changed[row.pk] = (stored, digest)
    write_columns(model, ["explained", "explained_digest"], changed)
    gone = model.objects.on(cluster_id).filter(done, explained__isnull=False)
    return len(changed) + int(gone.update(explained=None, explained_digest=None))


def json_digest(value: Any) -> int:
    """8 bytes of BLAKE2b over ``value``'s JSON with its keys sorted, as a signed integer
    (a ``bigint``): the same for the same value, whatever the order its dicts were built in."""
    text = orjson.dumps(value, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS)
    return int.from_bytes(hashlib.blake2b(text, digest_size=8).digest(), "big", signed=True)


def to_json(item: WorkloadRow | ObservedPod | ObservedCreateFailure) -> dict[str, Any]:
    """What is stored of an explained row: ``why`` (None: nothing in its way), ``estimate``
    (its moments as ISO text) and, for a workload, the ClusterQueue its LocalQueue points
    to (Kueue names it only once it is admitted)."""
    why = getattr(item, "why", None)
    estimate = getattr(item, "estimate", None)
    return {
        "why": None if why is None else why_json(why),
        "estimate": None if estimate is None else estimate_json(estimate),
        **(
            {"cluster_queue": item.cluster_queue}
            if isinstance(item, WorkloadRow | ObservedWorkload)
            else {}
        ),
    }


def why_json(why: Explanation) -> dict[str, Any]:
    """``dataclasses.asdict`` of an explanation, written out: 50,000 of them per poll at the
    scale scenario took it 2 s (it copies every value deeply, by reflection)."""
    return {
        "cause": why.cause,
        "next_step": why.next_step,
        "action": None if why.action is None else dict(why.action),
        "evidence": list(why.evidence),
        "topic": why.topic,
        "belongs_to": why.belongs_to,
        "never": why.never,
    }


def estimate_json(estimate: Estimate) -> dict[str, Any]:
    """An estimate as stored, its moments as ISO text (``dataclasses.asdict``, written out)."""
    return {
        "summary": estimate.summary,
        "basis": estimate.basis,
        "low_s": estimate.low_s,
        "high_s": estimate.high_s,
        "earliest": _iso(estimate.earliest),
        "latest": _iso(estimate.latest),
    }


def _iso(moment: dt.datetime | None) -> str | None:
    return None if moment is None else moment.isoformat()


def from_json(stored: Mapping[str, Any]) -> tuple[Explanation | None, Estimate | None]:
    """The explanation and the estimate of a row's ``explained``."""
    why, estimate = stored.get("why"), stored.get("estimate")
    return (
        None if why is None else Explanation(**why),
        None
        if estimate is None
        else Estimate(
            **{
                **estimate,
                "earliest": _moment(estimate.get("earliest")),
                "latest": _moment(estimate.get("latest")),
            }
        ),
    )


def _moment(text: str | None) -> dt.datetime | None:
    return None if text is None else dt.datetime.fromisoformat(text)


class _ViewNode(NamedTuple):
    """The columns of an ObservedNode the explainer's fleet view reads (its capacity and
    the rest are not decoded)."""

    name: str
    labels: dict[str, str]
    allocatable: dict[str, Any]
    allocated: dict[str, Any]
    taints: list[dict[str, Any]]
    gpu_product: str
    gpu_count: int
    mig_config: str
    mig_config_by: str
    unschedulable: bool


def explainer_view(cluster_id: int) -> FleetView:
    """Cluster ``cluster_id``'s fleet as the explainer sees it: its nodes, pools, open drift
    and changes under way (another cluster's node of the same name is another node), built
    once per explanation of the cluster."""
    nodes = [
        _ViewNode(*row)
        for row in ObservedNode.objects.on(cluster_id)
        .filter(gone_since__isnull=True)
        .values_list(*_ViewNode._fields)
    ]
    pools = list(NodePool.objects.on(cluster_id))
    custom = custom_configs()
    cache: dict[tuple[str, str | None, int], dict[str, int] | None] = {}
    promised: dict[str, dict[str, int]] = {}
    for node in nodes:
        pool = pool_of(node.labels, pools)
        if pool is None or not pool.mig_config:
            continue
        model = model_for_product(node.gpu_product) if node.gpu_product else None
        key = (pool.mig_config, model, node.gpu_count)
        if key not in cache:
            cache[key] = promised_resources(
                pool.mig_config,
                node=node.name,
                model=model,
                gpu_count=node.gpu_count,
                custom=custom,
            )[0]
        if cache[key]:
            promised[node.name] = dict(cache[key] or {})
    changing = {}
    for pk, held in (
        MigChangeRequest.objects.on(cluster_id)
        .filter(state__in=CHANGING)
        .values_list("pk", "nodes")
    ):
        for name in held:
            changing[name] = pk
    drift = list(open_drift().filter(cluster_id=cluster_id))
    name = Cluster.objects.filter(pk=cluster_id).values_list("name", flat=True).first() or ""
    return fleet_view(nodes, [], pools, drift, changing, promised, cluster=name)


def gangs_of(pods: list[ObservedPod], cluster_id: int) -> dict[tuple[str, str], Gang]:
    """The gangs these pods of cluster ``cluster_id`` belong to, with where their members
    are (two queries)."""
    keys = {(p.namespace, p.group_name) for p in pods}
    if not keys:
        return {}
    namespaces = {k[0] for k in keys}
    names = {k[1] for k in keys}
    groups = {
        (g.namespace, g.name): g
        for g in ObservedPodGroup.objects.on(cluster_id).filter(
            namespace__in=namespaces, name__in=names
        )
    }
    members: dict[tuple[str, str], list[ObservedPod]] = {}
    for member in ObservedPod.objects.on(cluster_id).filter(
        namespace__in=namespaces, group_name__in=names
    ):
        members.setdefault((member.namespace, member.group_name), []).append(member)
    out = {}
    for key, group in groups.items():
        if key not in keys:
            continue
        running = [m for m in members.get(key, []) if m.phase == "Running"]
        held: dict[str, int] = {}
        for member in running:
            for resource, count in member.gpu_requests.items():
                held[resource] = held.get(resource, 0) + int(count)
        out[key] = Gang(
            name=group.name,
            queue=group.queue,
            min_member=group.min_member,
            running=len(running),
            pending=sum(1 for m in members.get(key, []) if m.phase == "Pending"),
            held=held,
            min_resources=group.min_resources,
            message=group.message,
        )
    return out


def _waiting(workload: WorkloadRow, now: dt.datetime, pending: dict[str, int]) -> Waiting:
    since = workload.queued_at or workload.created_at
    requeue = workload.requeue_at
    return Waiting(
        waited_s=int((now - since).total_seconds()) if since else None,
        pending=pending.get(workload.cluster_queue),
        evictions=workload.evictions,
        evicted_reason=workload.evicted_reason,
        evicted=workload.evicted_at is not None,
        requeue_in_s=int((requeue - now).total_seconds()) if requeue and requeue > now else None,
    )


def _pending_per_cluster_queue(workloads: list[WorkloadRow], cluster_id: int) -> dict[str, int]:
    """ClusterQueue of cluster ``cluster_id`` -> its status.pendingWorkloads, read (one
    query) only when a workload waits without a word from Kueue and without a place in line."""
    if not any(not w.admitted and not w.message and w.position is None for w in workloads):
        return {}
    return {
        name: int(status.get("pendingWorkloads") or 0)
        for name, status in ObservedObject.objects.on(cluster_id)
        .filter(kind="ClusterQueue")
        .values_list("name", "status")
    }


def _pinned(
    workloads: list[WorkloadRow], cluster_id: int
) -> tuple[dict[tuple[str, str], Pinned], list[tuple[dict[str, str], dict[str, Any]]]]:
    """The admitted workloads Kueue gave a flavor for a requested zero, beside another
    flavor (what they are pinned to), and the cluster's nodes (labels, allocatable): two
    queries, only when there is such a workload."""
    found = [
        w
        for w in workloads
        if w.admitted
        and len(set((w.flavors or {}).values())) > 1
        and any(not (w.requests or {}).get(r) for r in w.flavors or {})
    ]
    if not found:
        return {}, []
    labels = dict(ResourceFlavor.objects.on(cluster_id).values_list("name", "node_labels"))
    nodes = list(
        ObservedNode.objects.on(cluster_id)
        .filter(gone_since__isnull=True)
        .values_list("labels", "allocatable")
    )
    pinned = {
        (w.namespace, w.name): Pinned(
            w.flavors,
            w.requests or {},
            {f: labels.get(f) or {} for f in set(w.flavors.values())},
        )
        for w in found
    }
    return pinned, nodes


def _undercharged(
    workloads: Sequence[WorkloadRow | Admitted], cluster_id: int
) -> list[Undercharged]:
    """The admitted workloads of cluster ``cluster_id`` Kueue charges less of a GPU resource
    than their pods ask for (what Kueue charged, from the Workload's podSets, against the
    pods that carry its name): one query, only when a workload is admitted."""
    admitted = {(w.namespace, w.name): w for w in workloads if w.admitted}
    if not admitted:
        return []
    asked: dict[tuple[str, str], dict[str, int]] = {}
    for namespace, name, requests in (
        ObservedPod.objects.on(cluster_id)
        .exclude(workload_name="")
        .values_list("namespace", "workload_name", "gpu_requests")
    ):
        if (namespace, name) in admitted:
            total = asked.setdefault((namespace, name), {})
            for resource, amount in (requests or {}).items():
                total[resource] = total.get(resource, 0) + int(amount)
    out = []
    for key, total in sorted(asked.items()):
        charged = admitted[key].requests or {}
        for resource, amount in sorted(total.items()):
            if amount > int(charged.get(resource, 0)):
                out.append(Undercharged(*key, resource, int(charged.get(resource, 0)), amount))
    return out


def _explain_pods(
    pods: list[ObservedPod],
    cluster_id: int,
    workloads: list[WorkloadRow],
    charged_less: list[Undercharged],
) -> None:
    gangs = gangs_of([p for p in pods if p.group_name], cluster_id)
    view = explainer_view(cluster_id)
    claims = claim_verdicts([p for p in pods if p.resource_claims], cluster_id)
    pinned, nodes = _pinned(workloads, cluster_id)
    for pod in pods:
        gang = gangs.get((pod.namespace, pod.group_name))
        held = pinned.get((pod.namespace, pod.workload_name)) if pod.workload_name else None
        stuck = (
            explain_pinned(
                requests=pod.gpu_requests,
                pinned=held,
                nodes=nodes,
                evidence=[pod.pending_message] if pod.pending_message else [],
            )
            if held is not None and not pod.node_name
            else None
        )
        if gang is not None:
            pod.why = explain_gang(  # type: ignore[attr-defined]
                namespace=pod.namespace, name=pod.name, gang=gang
            )
        elif stuck is not None:
            pod.why = stuck  # type: ignore[attr-defined]
        else:
            pod.why = explain_pod(  # type: ignore[attr-defined]
                namespace=pod.namespace,
                name=pod.name,
                requests=pod.gpu_requests,
                message=pod.pending_message,
                fleet=view,
                node_name=pod.node_name,
                defaulted=pod.limit_defaulted,
                claims=claims.get((pod.namespace, pod.name), ()),
            )
            why = pod.why  # type: ignore[attr-defined]
            if charged_less and why.topic == "insufficient-gpu" and not why.never:
                pod.why = explain_taken(  # type: ignore[attr-defined]
                    pod.why,  # type: ignore[attr-defined]
                    wanted=pod.gpu_requests,
                    admitted=bool(pod.workload_name),
                    held=[
                        h
                        for h in charged_less
                        if (h.namespace, h.name) != (pod.namespace, pod.workload_name)
                    ],
                )
        if pod.workload_name:
            where = f" in queue {pod.queue_name}" if pod.queue_name else ""
            pod.why.belongs_to = f"workload {pod.workload_name}{where}"  # type: ignore[attr-defined]
        elif pod.queue_name:
            pod.why.belongs_to = f"queue {pod.queue_name}"  # type: ignore[attr-defined]


def claim_verdicts(
    pods: Sequence[ObservedPod], cluster_id: int
) -> dict[tuple[str, str], list[tuple[str, dra.ClaimVerdict]]]:
    """(namespace, pod) -> why each of its claims the scheduler has not allocated is not,
    read against the cluster's DRA classes, published devices and allocations (read once,
    only when a waiting pod has claims)."""
    if not pods:
        return {}
    out = _unmade_claims(pods, cluster_id)
    wanted = {(p.namespace, c["claim"]) for p in pods for c in p.resource_claims if c["claim"]}
    claims = ObservedResourceClaim.objects.on(cluster_id)
    pending = {
        (c.namespace, c.name): c
        for c in claims.filter(
            state=ObservedResourceClaim.State.PENDING,
            namespace__in={namespace for namespace, _ in wanted},
        )
        if (c.namespace, c.name) in wanted
    }
    if not pending:
        return out
    classes = {
        c.name: c.selectors
        for c in ObservedDeviceClass.objects.on(cluster_id).only("name", "selectors")
    }
    taken = dra.taken_devices(
        claims.filter(state=ObservedResourceClaim.State.ALLOCATED).values_list(
            "allocated", flat=True
        )
    )
    slices = ObservedResourceSlice.objects.on(cluster_id).values(
        "node_name", "driver", "pool", "devices", "shared_counters"
    )
    gpus = dra.gpus_of(slices, taken)
    for pod in pods:
        mine = [pending.get((pod.namespace, asked["claim"])) for asked in pod.resource_claims]
        said = [
            (claim.name, dra.claim_verdict(request, classes, gpus))
            for claim in mine
            if claim is not None
            for request in claim.requests
        ]
        if said:
            apart = dra.apart(
                [(c.name, c.requests) for c in mine if c is not None],
                said,
                classes,
                gpus,
                lambda: dra.gpus_of(slices, set()),
            )
            out.setdefault((pod.namespace, pod.name), []).extend([*apart, *said])
    return out


def _unmade_claims(
    pods: Sequence[ObservedPod], cluster_id: int
) -> dict[tuple[str, str], list[tuple[str, dra.ClaimVerdict]]]:
    """Pods whose claim from a template is not made yet, in a namespace whose quota on a
    device class is used up (the API server refuses the claim the controller would make):
    the class, used and hard, as the quota's status last said them; in a namespace its
    cluster's MIG policy governs, the grants, and the classes the pod's template asks for
    where the poll read it (``what``), so the one cause that holds is named."""
    unmade = [p for p in pods if any(c["template"] and not c["claim"] for c in p.resource_claims)]
    if not unmade:
        return {}
    full: dict[str, tuple[str, int, int]] = {}
    governed: dict[str, list[tuple[str, int, int]]] = {}
    for (namespace, quota), status in observed_quotas(
        sorted({p.namespace for p in unmade}), cluster_id
    ).items():
        if quota == mig_policy.policy_quota_name(namespace):
            governed[namespace] = _granted(status)
            continue
        for resource, hard in (status.get("hard") or {}).items():
            found = DEVICE_CLASS_QUOTA.match(resource)
            used = _amount((status.get("used") or {}).get(resource, 0))
            if found and used >= _amount(hard):
                full.setdefault(namespace, (found["device_class"], int(used), int(_amount(hard))))
    asks = claim_templates_ask(
        cluster_id, sorted({p.namespace for p in unmade if p.namespace in governed})
    )
    out: dict[tuple[str, str], list[tuple[str, dra.ClaimVerdict]]] = {}
    for pod in unmade:
        template = next(c["template"] for c in pod.resource_claims if not c["claim"])
        asked = asks.get((pod.namespace, template))
        if pod.namespace in governed and _policy_refuses(governed[pod.namespace], asked):
            granted = governed[pod.namespace]
            out[(pod.namespace, pod.name)] = [
                (
                    template,
                    dra.ClaimVerdict(
                        "",
                        dra.POLICY,
                        ", ".join(c for c, _, _ in granted),
                        what=", ".join(asked or ()),
                        classes=tuple(f"{c}={used}/{hard}" for c, used, hard in granted),
                    ),
                )
            ]
        elif pod.namespace in full:
            name, used, hard = full[pod.namespace]
            out[(pod.namespace, pod.name)] = [
                (template, dra.ClaimVerdict("", dra.QUOTA, name, wanted=hard, taken=used))
            ]
    return out


def _policy_refuses(granted: list[tuple[str, int, int]], asked: list[str] | None) -> bool:
    """Whether a governed namespace's MIG policy is what refuses a claim of the ``asked``
    classes (None: its template was not read, so it may be): one the policy closes, or a
    granted one used up."""
    if asked is None:
        return True
    room = {c: used < hard for c, used, hard in granted}
    return any(not room.get(c, False) for c in asked)


def _granted(status: dict[str, Any]) -> list[tuple[str, int, int]]:
    """The classes a namespace's MIG policy quota grants (more than 0): class, used, hard."""
    out = []
    for resource, hard in sorted((status.get("hard") or {}).items()):
        found = DEVICE_CLASS_QUOTA.match(resource)
        if found and _amount(hard) > 0:
            used = _amount((status.get("used") or {}).get(resource, 0))
            out.append((found["device_class"], int(used), int(_amount(hard))))
    return out


def explain(
    workloads: list[WorkloadRow],
    pods: list[ObservedPod],
    failures: list[ObservedCreateFailure],
    *,
    cluster_id: int,
    now: dt.datetime,
    held: list[Undercharged],
    admitted: Sequence[Admitted],
) -> None:
    """Each of these rows of cluster ``cluster_id`` (its workloads not finished, its Pending
    pods ordered by namespace and name, its recent refused creations) with ``.why`` (an
    ``Explanation``; None for an admitted workload with nothing in its way) and
    ``.estimate`` (an ``Estimate``; None for an admitted workload), as of ``now``. An
    admitted workload whose pod is stuck gets the pod's explanation (Kueue names the
    workload on its pods). Everything the explanations and estimates count is read on that
    cluster: its fleet (built once), gangs, queues, quotas, run times and changes; ``held``
    are the admitted workloads Kueue charges less than their pods ask, of all the cluster's
    (:func:`_undercharged`: the settled ones too, which are not among these rows);
    ``admitted`` is every admitted workload of the cluster not finished (:func:`admitted_of`),
    what the lines count as running."""
    cq_of: dict[tuple[str, str], str] = {}
    if any(not w.cluster_queue for w in workloads):
        cq_of = {
            (ns, lq): cq
            for ns, lq, cq in LocalQueue.objects.filter(
                namespace__name__in={w.namespace for w in workloads},
                namespace__cluster_id=cluster_id,
            ).values_list("namespace__name", "name", "cluster_queue__name")
        }
    if pods:
        _explain_pods(pods, cluster_id, workloads, held)
    stuck = {(p.namespace, p.workload_name): p for p in pods if p.workload_name}
    pending = _pending_per_cluster_queue(workloads, cluster_id)
    for workload in workloads:
        cluster_queue = workload.cluster_queue or cq_of.get(
            (workload.namespace, workload.queue_name), ""
        )
        pod = stuck.get((workload.namespace, workload.name))
        if workload.admitted:
            since = workload.admitted_at
            workload.why = explain_admitted(
                cluster_queue=cluster_queue,
                pod=pod.name if pod is not None else "",
                pod_why=getattr(pod, "why", None),
                pods_ready=workload.pods_ready,
                admitted_s=int((now - since).total_seconds()) if since else None,
            )
            for charged in (
                h for h in held if (h.namespace, h.name) == (workload.namespace, workload.name)
            ):
                workload.why = explain_undercharged(
                    charged,
                    workload.why,
                )
            continue
        workload.cluster_queue = cluster_queue
        workload.why = explain_workload(
            namespace=workload.namespace,
            name=workload.name,
            queue=workload.queue_name,
            reason=workload.reason,
            message=workload.message,
            position=workload.position,
            cluster_queue=cluster_queue,
            waiting=_waiting(workload, now, pending),
        )
    _explain_failures(failures, cluster_id)
    attach_estimates(workloads, pods, failures, now, cluster_id, admitted)


def observed_quotas(
    namespaces: list[str], cluster_id: int
) -> dict[tuple[str, str], dict[str, Any]]:
    """(namespace, ResourceQuota) -> its status as last polled on cluster ``cluster_id``
    (``hard``, ``used``)."""
    return {
        (ns, name): status or {}
        for ns, name, status in ObservedObject.objects.on(cluster_id)
        .filter(kind="ResourceQuota", namespace__in=namespaces)
        .values_list("namespace", "name", "status")
    }


def _explain_failures(failures: list[ObservedCreateFailure], cluster_id: int) -> None:
    """Controllers whose pods the API server refuses, counted against the quotas as last
    polled (one query, when there is a refusal)."""
    if not failures:
        return
    quotas = observed_quotas(sorted({f.namespace for f in failures}), cluster_id)
    for failure in failures:
        failure.why = explain_create_failure(  # type: ignore[attr-defined]
            namespace=failure.namespace,
            kind=failure.kind,
            name=failure.name,
            message=failure.message,
            observed=_refusing_quota(failure, quotas),
        )


def _refusing_quota(
    failure: ObservedCreateFailure, quotas: Mapping[tuple[str, str], Mapping[str, Any]]
) -> Mapping[str, Any] | None:
    """The observed status of the ResourceQuota a refusal names, if the poll saw it."""
    named = _QUOTA_NAMED.search(failure.message)
    return quotas.get((failure.namespace, named[1])) if named else None


def _amount(value: Any) -> float:
    return _parsed(str(value))


@functools.lru_cache(maxsize=4096)
def _parsed(text: str) -> float:
    """A quantity's value (0 when it is not one); the few distinct amounts of a fleet's
    requests and quotas are parsed once, not once per workload and queue."""
    try:
        return float(parse_quantity(text))
    except QuantityError:
        return 0.0


def _quotas(cq: ClusterQueue) -> tuple[dict[str, float], dict[str, float], dict[str, float]]:
    """Per resource (all flavors together): nominal quota, what it may lend, the most it may
    borrow (no entry: no limit)."""
    nominal: dict[str, float] = {}
    lend: dict[str, float] = {}
    borrow: dict[str, float] = {}
    unlimited: set[str] = set()
    for _, _, quota in quota_entries(cq.resource_groups):
        name = quota["name"]
        amount = _amount(quota.get("nominalQuota", 0))
        nominal[name] = nominal.get(name, 0) + amount
        lent = quota.get("lendingLimit")
        lend[name] = lend.get(name, 0) + (amount if lent is None else _amount(lent))
        if quota.get("borrowingLimit") is None:
            unlimited.add(name)
        else:
            borrow[name] = borrow.get(name, 0) + _amount(quota["borrowingLimit"])
    return nominal, lend, {r: n for r, n in borrow.items() if r not in unlimited}


def _used(held: list[InLine]) -> dict[str, float]:
    used: dict[str, float] = {}
    for workload in held:
        for resource, amount in (workload.requests or {}).items():
            used[resource] = used.get(resource, 0) + _amount(amount)
    return used


def _root(cohort_id: int | None, cohorts: dict[int, Cohort]) -> int | None:
    """The top of the cohort tree a cohort is in (a cycle, which Kueue refuses, stops it)."""
    seen: set[int] = set()
    while cohort_id is not None and cohort_id not in seen and cohort_id in cohorts:
        seen.add(cohort_id)
        parent = cohorts[cohort_id].parent_id
        if parent is None:
            return cohort_id
        cohort_id = parent
    return cohort_id


def _capacity(
    cq: ClusterQueue,
    queues: dict[str, ClusterQueue],
    admitted: dict[str, list[InLine]],
    cohorts: dict[int, Cohort],
    pools: dict[int, tuple[dict[str, float], dict[str, float]]],
) -> tuple[dict[str, float], dict[str, float]]:
    """What ``cq`` can hold now and at the most, as Kueue counts it: what it uses, what is
    left of its own guaranteed part (nominal minus what it lends), and what is left of its
    cohort tree's pool of lendable quota (every member's lending limit, or its nominal
    quota, and the cohorts' own), less what every member uses of the pool (another queue
    borrowing takes from it too), up to its borrowing limits (the limits of the cohorts in
    between are not counted). ``pools`` keeps each tree's pool for the next queue of the
    same tree (a tree of 500 queues is summed once, not once per queue)."""
    nominal, lend_here, limits = _quotas(cq)
    root = _root(cq.cohort_id, cohorts)
    if root is None:
        return nominal, nominal
    if root not in pools:
        pools[root] = _tree_pool(root, queues, admitted, cohorts)
    pool, pool_used = pools[root]
    here = _used(admitted.get(cq.name, []))
    now: dict[str, float] = {}
    most: dict[str, float] = {}
    for resource, amount in nominal.items():
        guaranteed = amount - lend_here.get(resource, amount)
        holds = here.get(resource, 0)
        free = max(0.0, guaranteed - holds) + max(0.0, pool[resource] - pool_used[resource])
        cap = amount + limits.get(resource, float("inf"))
        now[resource] = min(holds + free, cap)
        most[resource] = min(guaranteed + pool[resource], cap)
    return now, most


def _tree_pool(
    root: int,
    queues: dict[str, ClusterQueue],
    admitted: dict[str, list[InLine]],
    cohorts: dict[int, Cohort],
) -> tuple[dict[str, float], dict[str, float]]:
    """A cohort tree's pool of lendable quota (its members' and its cohorts' own) and what
    its members use of it beyond their guaranteed parts."""
    pool: dict[str, float] = {}
    pool_used: dict[str, float] = {}
    for peer in queues.values():
        if _root(peer.cohort_id, cohorts) != root:
            continue
        own, lend, _ = _quotas(peer)
        used = _used(admitted.get(peer.name, []))
        for resource, amount in own.items():
            lendable = lend.get(resource, amount)
            pool[resource] = pool.get(resource, 0) + lendable
            beyond = max(0.0, used.get(resource, 0) - (amount - lendable))
            pool_used[resource] = pool_used.get(resource, 0) + beyond
    tree = [c for pk, c in cohorts.items() if _root(pk, cohorts) == root]
    for _, _, quota in (e for c in tree for e in quota_entries(c.resource_groups)):
        name, amount = quota["name"], _amount(quota.get("nominalQuota", 0))
        pool[name] = pool.get(name, 0) + amount
    return pool, pool_used


def _queue_changes(
    changes: list[MigChangeRequest], now: dt.datetime
) -> dict[str, list[QueueChange]]:
    """ClusterQueue -> the approved MIG changes not done yet that raise its quota."""
    out: dict[str, list[QueueChange]] = {}
    for change in changes:
        adds: dict[str, dict[str, float]] = {}
        for item in change.queue_changes or []:
            more = _amount(item.get("to", 0)) - _amount(item.get("from", 0))
            if more > 0:
                per = adds.setdefault(item.get("cluster_queue", ""), {})
                per[item.get("resource", "")] = per.get(item.get("resource", ""), 0) + more
        for queue, added in adds.items():
            out.setdefault(queue, []).append(
                QueueChange(change.pk, list(change.nodes), added, *_timing(change, now))
            )
    return out


def _timing(change: MigChangeRequest, now: dt.datetime) -> tuple[int | None, bool]:
    start = change.window_start
    starts_in = int((start - now).total_seconds()) if start and start > now else None
    return starts_in, change.state == MigChangeRequest.State.RUNNING


def _node_changes(
    changes: list[MigChangeRequest], now: dt.datetime, cluster_id: int
) -> list[NodeChange]:
    """What each node of an approved MIG change on cluster ``cluster_id`` not done yet offers
    after it (two queries, only when there is such a change)."""
    changes = [
        c
        for c in changes
        if c.kind == MigChangeRequest.Kind.MIG and c.target_config and c.cluster_id == cluster_id
    ]
    if not changes:
        return []
    names = {n for c in changes for n in c.nodes}
    nodes = {n.name: n for n in ObservedNode.objects.on(cluster_id).filter(name__in=names)}
    custom = custom_configs()
    out = []
    for change in changes:
        for name in change.nodes:
            node = nodes.get(name)
            if node is None:
                continue
            model = model_for_product(node.gpu_product) if node.gpu_product else None
            offers, _ = promised_resources(
                change.target_config,
                node=name,
                model=model,
                gpu_count=node.gpu_count,
                custom=custom,
            )
            if offers:
                out.append(
                    NodeChange(change.pk, name, change.target_config, offers, *_timing(change, now))
                )
    return out


class InLine(NamedTuple):
    """What a line needs of every workload in it (not Kueue's long messages), read as plain
    values, not models: the lines of the scale scenario hold all its 50,000 workloads."""

    namespace: str
    name: str
    queue_name: str
    cluster_queue: str
    admitted: bool
    requests: dict[str, Any]
    priority: int
    position: int | None
    created_at: dt.datetime | None
    queued_at: dt.datetime | None
    admitted_at: dt.datetime | None


LINE_FIELDS = list(InLine._fields)
_LINE_OF = operator.attrgetter(*LINE_FIELDS)  # a row's InLine fields, in order


class _Queues:
    """The ClusterQueues that waiting workloads wait in, with everything in them (waiting
    and admitted, every team's: their places and quota count, never their names), from the
    rows the explainer read (every workload that waits, every admitted one) and a fixed
    number of queries."""

    def __init__(
        self,
        waiting: list[WorkloadRow],
        admitted: Sequence[Admitted],
        now: dt.datetime,
        cluster_id: int,
    ) -> None:
        self.now = now
        self.queues = {cq.name: cq for cq in ClusterQueue.objects.on(cluster_id)}
        self.cohorts = {c.pk: c for c in Cohort.objects.on(cluster_id)}
        wanted = {w.cluster_queue for w in waiting if w.cluster_queue}
        tree_of = {q: _root(cq.cohort_id, self.cohorts) for q, cq in self.queues.items()}
        trees = {tree_of[q] for q in wanted if q in tree_of} - {None}
        self.names = wanted | {q for q, tree in tree_of.items() if tree in trees}
        self.local: dict[tuple[str, str], tuple[str, str]] = {
            (ns, lq): (cq, stop)
            for ns, lq, cq, stop in LocalQueue.objects.filter(
                Q(cluster_queue__name__in=self.names)
                | Q(namespace__name__in={w.namespace for w in waiting}),
                namespace__cluster_id=cluster_id,
            ).values_list("namespace__name", "name", "cluster_queue__name", "stop_policy")
        }
        self.lines: dict[str, Line] = {}
        self.pools: dict[int, tuple[dict[str, float], dict[str, float]]] = {}
        self.order: dict[str, dict[tuple[str, str], int]] = {}
        self.admitted: dict[str, list[InLine]] = {}
        self.in_line: dict[str, list[InLine]] = {}
        local_names = {lq for _, lq in self.local}
        rows: list[Admitted | WorkloadRow] = [*admitted, *waiting]
        for other in rows:
            # in one of the lines' ClusterQueues, or waiting in a LocalQueue read above
            if other.cluster_queue not in self.names and (
                other.admitted or other.queue_name not in local_names
            ):
                continue
            queue = (
                other.cluster_queue or self.local.get((other.namespace, other.queue_name), ("",))[0]
            )
            if queue in self.names:
                into = self.admitted if other.admitted else self.in_line
                into.setdefault(queue, []).append(_in_line(other))

    def place(
        self, workload: WorkloadRow, changes: dict[str, list[QueueChange]]
    ) -> tuple[Line | None, int | None, str]:
        """The line ``workload`` waits in (built once per ClusterQueue), its place in it, and
        what stops its LocalQueue ("" when nothing does)."""
        stop = self.local.get((workload.namespace, workload.queue_name), ("", "None"))[1]
        held = f"LocalQueue {workload.queue_name} is stopped ({stop})" if stop != "None" else ""
        cq = self.queues.get(workload.cluster_queue)
        if cq is None:
            return None, 0, held
        if cq.name not in self.lines:
            self.lines[cq.name] = self._line(cq, changes)
        order = self.order[cq.name]
        return self.lines[cq.name], order.get((workload.namespace, workload.name)), held

    def _line(self, cq: ClusterQueue, changes: dict[str, list[QueueChange]]) -> Line:
        others = sorted(self.in_line.get(cq.name, []), key=_order)
        self.order[cq.name] = {(o.namespace, o.name): i for i, o in enumerate(others)}
        now, most = _capacity(cq, self.queues, self.admitted, self.cohorts, self.pools)
        return Line(
            cluster_queue=cq.name,
            capacity=now,
            most=most,
            running=[
                Running(o.requests or {}, (self.now - (o.admitted_at or self.now)).total_seconds())
                for o in self.admitted.get(cq.name, [])
            ],
            waiting=[o.requests or {} for o in others],
            strict=cq.queueing_strategy == ClusterQueue.QueueingStrategy.STRICT_FIFO,
            stopped=f"ClusterQueue {cq.name} is stopped ({cq.stop_policy})"
            if cq.stop_policy != "None"
            else "",
            changes=changes.get(cq.name, []),
        )


def _in_line(workload: Admitted | WorkloadRow) -> InLine:
    return InLine._make(_LINE_OF(workload))


def _order(workload: InLine) -> tuple[int, int, dt.datetime, str]:
    """The order of a ClusterQueue's line: Kueue's (its visibility API), and for those it
    gives no place, Kueue's rule after them: priority, then age."""
    since = workload.queued_at or workload.created_at or dt.datetime.max.replace(tzinfo=dt.UTC)
    if workload.position is not None:
        return (0, workload.position, since, f"{workload.namespace}/{workload.name}")
    return (1, -workload.priority, since, f"{workload.namespace}/{workload.name}")


def attach_estimates(
    workloads: list[WorkloadRow],
    pods: list[ObservedPod],
    failures: list[ObservedCreateFailure],
    now: dt.datetime,
    cluster_id: int,
    admitted: Sequence[Admitted],
) -> None:
    """``.estimate`` on each waiting workload, Pending pod and refused creation of cluster
    ``cluster_id`` (None on an admitted workload), dated from ``now``: a fixed number of
    queries however much waits or ran before, each line counted on that cluster (what runs
    in it: ``admitted``, every admitted workload of the cluster not finished)."""
    _estimate_all(workloads, pods, failures, now, cluster_id, admitted)
    for item in [*workloads, *pods, *failures]:
        if item.estimate is not None:  # type: ignore[attr-defined]
            item.estimate = dated(item.estimate, now)  # type: ignore[attr-defined]


def _estimate_all(
    workloads: list[WorkloadRow],
    pods: list[ObservedPod],
    failures: list[ObservedCreateFailure],
    now: dt.datetime,
    cluster_id: int,
    admitted: Sequence[Admitted],
) -> None:
    waiting = [w for w in workloads if not w.admitted]
    for workload in workloads:
        workload.estimate = None
    changes: list[MigChangeRequest] = []
    if waiting or pods:
        changes = list(
            MigChangeRequest.objects.on(cluster_id)
            .filter(state__in=CHANGING)
            .order_by("-created_at")
        )
    if waiting:
        queues = _Queues(waiting, admitted, now, cluster_id)
        raised = _queue_changes(changes, now)
        by_queue, by_namespace = run_times(
            cluster_id=cluster_id,
            cluster_queues=[w.cluster_queue for w in waiting],
            namespaces=[w.namespace for w in waiting],
            now=now,
        )
        queue_runs = {q: Runs(runs, q) for q, runs in by_queue.items()}  # each sorted once
        namespace_runs = {n: Runs(runs, f"namespace {n}") for n, runs in by_namespace.items()}
        for workload in waiting:
            requeue = workload.requeue_at
            back = int((requeue - now).total_seconds()) if requeue and requeue > now else None
            line, place, held = queues.place(workload, raised)
            workload.estimate = estimate_workload(
                requests=workload.requests or {},
                line=line,
                place=place,
                exact=workload.position is not None,
                held=held,
                histories=[
                    queue_runs.get(workload.cluster_queue) or Runs([], workload.cluster_queue),
                    namespace_runs.get(workload.namespace)
                    or Runs([], f"namespace {workload.namespace}"),
                ],
                never=workload.why.never if workload.why else "",
                requeue_in_s=back,
                short_now=kueue_short(workload.message or ""),
            )
    _estimate_pods(workloads, pods, _node_changes(changes, now, cluster_id) if pods else [])
    for failure in failures:
        failure.estimate = estimate_refused(never=failure.why.never)  # type: ignore[attr-defined]


def _estimate_pods(
    workloads: list[WorkloadRow], pods: list[ObservedPod], changes: list[NodeChange]
) -> None:
    """A pod of a waiting workload waits as its workload does; any other, for the nodes."""
    of = {(w.namespace, w.name): w for w in workloads}
    for pod in pods:
        workload = of.get((pod.namespace, pod.workload_name)) if pod.workload_name else None
        mine: Estimate | None = getattr(workload, "estimate", None)
        if mine is not None:
            pod.estimate = mine  # type: ignore[attr-defined]
            continue
        why = pod.why  # type: ignore[attr-defined]
        pod.estimate = estimate_pod(  # type: ignore[attr-defined]
            wanted=pod.gpu_requests or {},
            never=why.never,
            topic=why.topic,
            changes=changes,
            gang=bool(pod.group_name),
            admitted_workload=pod.workload_name if workload is not None else "",
        )
