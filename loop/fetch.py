"""What a poll asks the cluster for: the LIST calls (paginated, decoded to plain dicts by
the gateway), gathered into one :class:`Listing`. Optional APIs (Kueue, Volcano, Kueue's
visibility API, Dynamic Resource Allocation) that the cluster does not serve are skipped,
never an error."""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings

from cluster.decode import (
    QUEUE_OF_INVOLVED,
    as_int,
    pod_queue,
    waiting_in,
    workload_event_values,
)
from cluster.discovery import GPU_OPERATOR_GROUP, Discovered, decode_discovery, served_versions
from cluster.models import Cluster, ObservedEvent
from cluster.selectors import rendering_for
from gpus.labels import DEVICE_PLUGIN_APP
from kube import Gateway, KubeError, NotFound, ObjectRef
from portal.vocabulary.labels import MANAGED_BY_KEY, MANAGED_BY_VALUE
from queues.kueue_config import CONFIGMAP, KUEUE_NAMESPACE
from queues.models import ClusterQueue, LocalQueue

log = logging.getLogger(__name__)
FORBIDDEN = 403
Objects = list[dict[str, Any]]
# Requests to Kueue's visibility API in flight at once (one per ClusterQueue a poll asks).
VISIBILITY_AT_ONCE = 4
# Objects per LIST page. 150,000 pods are 75 pages at 2,000 (300 at kubectl's 500): each page
# is a round trip through the API server's authentication and the client's TLS and decoding,
# and the poll holds every page's objects anyway. At the scale scenario (about 450 -> 120
# list requests with the workloads and events) the steady poll's fetch took 2.36 s, not 2.54.
PAGE_SIZE = 2000


DRA = "resource.k8s.io/v1"

# An Event last said this long before the newest one kept is not looked at again (it was
# kept when it was new, or left out with its workload): a steady poll reads and compares the
# few Events of the last minutes, not every one the API server still holds.
EVENTS_LOOKED_BACK = dt.timedelta(minutes=10)


@dataclass
class DraListing:
    """Dynamic Resource Allocation as the cluster serves it (resource.k8s.io/v1)."""

    device_classes: Objects
    slices: Objects
    claims: Objects


@dataclass
class Listing:
    """One poll's view of the cluster. ``workloads``/``podgroups``/``dra`` are None where
    their APIs are not served (their rows are then left as they are)."""

    nodes: Objects
    pods: Objects
    managed: dict[tuple[str, str], Objects]
    workloads: Objects | None
    podgroups: Objects | None
    failures: Objects
    positions: dict[tuple[str, str], tuple[int, int]] = field(default_factory=dict)
    dra: DraListing | None = None
    events: dict[tuple[str, str], dict[str, Any]] | None = None


def fetch(gateway: Gateway, cluster: Cluster) -> Listing:
    """From the ``cluster`` the gateway reaches: LIST nodes, non-terminal pods, the portal's
    objects, Kueue workloads (and their place in line), Volcano PodGroups, FailedCreate
    events, DRA's DeviceClasses, ResourceSlices, ResourceClaims and ResourceClaimTemplates
    and the Events about Kueue Workloads, in that order."""
    nodes = gateway.list("v1", "Node", page_size=PAGE_SIZE)
    pods = gateway.list(
        "v1",
        "Pod",
        page_size=PAGE_SIZE,
        field_selector="status.phase!=Succeeded,status.phase!=Failed",
    )
    backend, version = rendering_for(cluster)
    managed = list_managed(gateway, backend=backend, version=version)
    if backend == "kueue":
        managed[("v1", "ConfigMap")] = kueue_configuration(gateway)
    workloads = list_workloads(gateway, backend=backend, version=version)
    positions = queue_positions(gateway, cluster, workloads) if workloads else {}
    podgroups = list_podgroups(gateway)
    failures = live_failures(
        gateway,
        gateway.list("v1", "Event", field_selector="reason=FailedCreate", page_size=PAGE_SIZE),
    )
    dra = list_dra(gateway)
    if dra is not None:
        # What a pod's claim from a template asks for, when the API server refused to make
        # it (the explainer reads the class): kept with the observed objects, a few per team.
        managed[(DRA, "ResourceClaimTemplate")] = claim_templates(gateway)
        # The DeviceClasses of a governed cluster's MIG policy are the portal's objects too:
        # taken from the list of every class (no second request), so drift sees them.
        managed[(DRA, "DeviceClass")] = [
            c
            for c in dra.device_classes
            if ((c.get("metadata") or {}).get("labels") or {}).get(MANAGED_BY_KEY)
            == MANAGED_BY_VALUE
        ]
    return Listing(
        nodes,
        pods,
        managed,
        workloads,
        podgroups,
        failures,
        positions,
        dra,
        workload_events(gateway, events_since(cluster.pk)) if workloads is not None else None,
    )


def events_since(cluster_id: int) -> str:
    """The time (RFC 3339, to the second, as the API server writes them) from which Events
    are read and compared (:func:`workload_events`): EVENTS_LOOKED_BACK before the
    newest one kept; empty (every Event) when none is kept yet."""
    newest = (
        ObservedEvent.objects.on(cluster_id)
        .order_by("-last_seen")
        .values_list("last_seen", flat=True)
        .first()
    )
    if newest is None:
        return ""
    return (newest - EVENTS_LOOKED_BACK).astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def workload_events(
    gateway: Gateway, since: str = ""
) -> dict[tuple[str, str], dict[str, Any]] | None:
    """The Events about Kueue Workloads (the API server selects them by their involved
    object's kind) last said at ``since`` or later (RFC 3339; empty: all of them,
    ``events_since``), each decoded as its page arrives, so the poll holds one
    page of Events at a time and the few it keeps, never the whole list beside its rows;
    keyed by the Event's namespace and name. None where the portal's ClusterRole does not
    grant the list (the rest of the poll goes on)."""
    out: dict[tuple[str, str], dict[str, Any]] = {}
    try:
        for page in gateway.list_pages(
            "v1", "Event", field_selector="involvedObject.kind=Workload", page_size=PAGE_SIZE
        ):
            for event in page:
                if since and last_said(event) < since:
                    continue  # older than what the poll looks at again: kept or left out
                values = workload_event_values(event)
                if values is not None:
                    out[values["namespace"], values["name"]] = values
    except KubeError as exc:
        if exc.status != FORBIDDEN:
            raise
        log.warning("Workload events not read: %s", exc.message)
        return None
    return out


def last_said(event: dict[str, Any]) -> str:
    """When an Event was last said, as the API server wrote it (RFC 3339 in UTC: its text
    sorts as its time, to the second)."""
    return str(
        (event.get("series") or {}).get("lastObservedTime")
        or event.get("lastTimestamp")
        or event.get("eventTime")
        or (event.get("metadata") or {}).get("creationTimestamp")
        or ""
    )


def list_dra(gateway: Gateway) -> DraListing | None:
    """DeviceClasses, ResourceSlices and ResourceClaims, or None where the API server does
    not serve resource.k8s.io/v1 (before Kubernetes 1.34, or with DRA turned off), or where
    the portal's ClusterRole does not grant their lists yet (an upgrade whose ClusterRole was
    not applied: the rest of the poll goes on, and the log says what to grant)."""
    try:
        return DraListing(
            gateway.list(DRA, "DeviceClass", page_size=PAGE_SIZE),
            gateway.list(DRA, "ResourceSlice", page_size=PAGE_SIZE),
            gateway.list(DRA, "ResourceClaim", page_size=PAGE_SIZE),
        )
    except NotFound:
        return None
    except KubeError as exc:
        if exc.status != FORBIDDEN:
            raise
        log.warning(
            "DRA objects not read: %s (apply the ClusterRole of this release: it lists "
            "deviceclasses, resourceslices and resourceclaims)",
            exc.message,
        )
        return None


def claim_templates(gateway: Gateway) -> Objects:
    """The ResourceClaimTemplates of every namespace, or none where the portal's ClusterRole
    does not grant their list yet (an upgrade whose ClusterRole was not applied: the
    explainer then names every cause a template's claim could be refused for)."""
    try:
        return gateway.list(DRA, "ResourceClaimTemplate", page_size=PAGE_SIZE)
    except KubeError as exc:
        if exc.status != FORBIDDEN:
            raise
        log.info("ResourceClaimTemplates not read: %s", exc.message)
        return []


def discover(
    gateway: Gateway,
    nodes: Objects,
    *,
    version: dict[str, Any] | None = None,
    pods: Objects | None = None,
) -> Discovered:
    """What the cluster runs (``cluster.discovery``): its version, its group discovery and,
    where the GPU Operator's group is served, its ClusterPolicies (a refusal: the nodes'
    labels tell instead). ``nodes`` is the poll's own node list, ``version`` its probe's
    answer to ``/version`` (asked here without one)."""
    version = version if version is not None else gateway.version()
    groups = gateway.api_groups()
    policies: Objects | None = None
    if "v1" in served_versions(groups, GPU_OPERATOR_GROUP):
        try:
            policies = gateway.list("nvidia.com/v1", "ClusterPolicy")
        except KubeError as exc:
            log.info("ClusterPolicies not read: %s", exc.message)
    labels = [(node.get("metadata") or {}).get("labels") or {} for node in nodes]
    return decode_discovery(
        version,
        groups,
        cluster_policies=policies,
        node_labels=labels,
        device_plugin_nodes=None if pods is None else device_plugin_nodes(pods),
    )


def device_plugin_nodes(pods: Objects) -> int:
    """The nodes a running device plugin pod of the GPU Operator is on (its namespace's pods
    with the operand's app label), as the GPU Operator check counts them. The namespace is
    read from the settings once: each read goes through Django's lazy settings object, and
    this runs over every pod of every poll."""
    namespace = settings.QM_GPU_OPERATOR_NAMESPACE
    nodes = set()
    for pod in pods:
        meta = pod.get("metadata") or {}
        if meta.get("namespace") != namespace:
            continue
        node = (pod.get("spec") or {}).get("nodeName")
        if (
            node
            and (meta.get("labels") or {}).get("app") == DEVICE_PLUGIN_APP
            and (pod.get("status") or {}).get("phase") == "Running"
        ):
            nodes.add(node)
    return len(nodes)


MAX_JOB_CHECKS = 100  # GETs per poll: FailedCreate events name a few Jobs, not thousands


def live_failures(gateway: Gateway, events: Objects) -> Objects:
    """The FailedCreate events whose Job still exists (the same Job: a new one of that name
    has another uid). An event outlives its Job by up to an hour; its explanation must not.
    Kinds other than Job, and Jobs beyond the first MAX_JOB_CHECKS, are kept as they are;
    a refused GET (an older ClusterRole without it) ends the checks."""
    uids: dict[tuple[str, str], str | None] = {}
    queues: dict[tuple[str, str], str] = {}
    checking = True
    kept = []
    for event in events:
        involved = event.get("involvedObject") or {}
        key = (involved.get("namespace", ""), involved.get("name", ""))
        if involved.get("kind") == "Job" and checking and key not in uids:
            if len(uids) >= MAX_JOB_CHECKS:
                checking = False
            else:
                try:
                    job = gateway.get(ObjectRef("batch/v1", "Job", key[1], key[0]))
                    uids[key] = (job.get("metadata") or {}).get("uid", "")
                    queues[key] = pod_queue((job.get("metadata") or {}).get("labels") or {})
                except NotFound:
                    uids[key] = None
                except KubeError as exc:
                    log.info("FailedCreate events not checked against their Jobs: %s", exc.message)
                    checking = False
        if key in uids and involved.get("kind") == "Job":
            uid = uids[key]
            if uid is None or (involved.get("uid") and uid and involved["uid"] != uid):
                continue  # the Job is gone (or was replaced): its refusals are history
            if queues.get(key):
                event = {**event, QUEUE_OF_INVOLVED: queues[key]}
        kept.append(event)
    return kept


def managed_kinds(*, backend: str, version: str) -> list[tuple[str, str]]:
    """(apiVersion, kind) of every kind the portal renders for ``backend`` (and Kueue
    ``version``)."""
    kinds = [
        ("v1", "Namespace"),
        ("v1", "ResourceQuota"),
        ("v1", "LimitRange"),
        ("scheduling.k8s.io/v1", "PriorityClass"),
    ]
    if backend == "volcano":
        kinds.append(("scheduling.volcano.sh/v1beta1", "Queue"))
    else:
        group = f"kueue.x-k8s.io/{version}"
        kinds += [(group, k) for k in ("ResourceFlavor", "Cohort", "ClusterQueue", "LocalQueue")]
    return kinds


def list_managed(gateway: Gateway, *, backend: str, version: str) -> dict[tuple[str, str], Objects]:
    """The objects carrying the portal's managed-by label, per kind."""
    out: dict[tuple[str, str], Objects] = {}
    for api_version, kind in managed_kinds(backend=backend, version=version):
        try:
            out[(api_version, kind)] = gateway.list(
                api_version, kind, label_selector=f"{MANAGED_BY_KEY}={MANAGED_BY_VALUE}"
            )
        except NotFound:
            out[(api_version, kind)] = []  # the CRD is not installed
    return out


def kueue_configuration(gateway: Gateway) -> Objects:
    """The ConfigMap a Kueue install keeps its Configuration in (its DRA mappings are read from
    it: ``queues.kueue_config``), or nothing where there is none or the portal may not get it
    (a ClusterRole of an earlier release)."""
    try:
        return [gateway.get(ObjectRef("v1", "ConfigMap", CONFIGMAP, KUEUE_NAMESPACE))]
    except NotFound:
        return []
    except KubeError as exc:
        if exc.status != FORBIDDEN:
            raise
        log.info("Kueue's configuration not read: %s", exc.message)
        return []


def list_workloads(gateway: Gateway, *, backend: str, version: str) -> Objects | None:
    """Kueue workloads, or None with the Volcano backend or without the Kueue CRDs."""
    if backend != "kueue":
        return None
    try:
        return gateway.list(f"kueue.x-k8s.io/{version}", "Workload", page_size=PAGE_SIZE)
    except NotFound:
        return None


def asked_together(gateway: Gateway, names: list[str]) -> Iterator[tuple[str, Objects | KubeError]]:
    """Each ClusterQueue of ``names`` with its pending workloads (Kueue's visibility API),
    or the error the API answered, in the order of ``names``: ``VISIBILITY_AT_ONCE``
    requests in flight at a time (each waits on the API server and Kueue behind it: a
    thousand asked one after the other waited a thousand round trips). A caller that stops
    reading (the API is not served) has the requests not yet sent dropped."""

    def ask(name: str) -> Objects | KubeError:
        try:
            return gateway.pending_workloads(name)
        except KubeError as exc:
            return exc

    pool = ThreadPoolExecutor(max_workers=VISIBILITY_AT_ONCE, thread_name_prefix="visibility")
    try:
        answers = [pool.submit(ask, name) for name in names]
        for name, answer in zip(names, answers, strict=True):
            yield name, answer.result()
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def maybe_waiting_in(cluster: Cluster | int, workloads: Objects | None) -> list[str]:
    """The names of ``cluster``'s ClusterQueues (by name) that may hold a pending workload:
    each one a LocalQueue of a workload in ``workloads`` points at, where that workload
    may wait in a line (``cluster.decode.waiting_in``). Every ClusterQueue when
    no list is given, or when such a workload names a LocalQueue the portal does not know
    (it may point at any of them): never one fewer than Kueue's lines fill. A workload
    made after the LIST is read at the next poll."""
    names = list(ClusterQueue.objects.on(cluster).order_by("name").values_list("name", flat=True))
    if workloads is None:
        return names
    queue_of = {
        (namespace, local_queue): cluster_queue
        for namespace, local_queue, cluster_queue in LocalQueue.objects.filter(
            cluster_queue__in=ClusterQueue.objects.on(cluster)
        ).values_list("namespace__name", "name", "cluster_queue__name")
    }
    asked: set[str] = set()
    for workload in workloads:
        line = waiting_in(workload)
        if line is None:
            continue
        if line not in queue_of:
            return names
        asked.add(queue_of[line])
    return [name for name in names if name in asked]


def list_podgroups(gateway: Gateway) -> Objects | None:
    """Volcano PodGroups (gangs), or None without the Volcano CRDs (read whatever the
    queue backend: a Kueue cluster may run Volcano for gang jobs too)."""
    try:
        return gateway.list("scheduling.volcano.sh/v1beta1", "PodGroup", page_size=PAGE_SIZE)
    except NotFound:
        return None


def queue_positions(
    gateway: Gateway, cluster: Cluster | int, workloads: Objects | None = None
) -> dict[tuple[str, str], tuple[int, int]]:
    """(namespace, workload) -> positions in its ClusterQueue and LocalQueue, from Kueue's
    visibility API, asked about the ClusterQueues of ``cluster`` (the one the gateway
    reaches) only, and of those only the ones a workload of ``workloads`` (the poll's LIST
    of them, when given) may wait in (:func:`maybe_waiting_in`): a queue nothing waits in
    has no line to read, and a poll of a thousand queues asked each of them, one request
    after the other. Empty where the API is not served or not allowed (one refusal ends
    it)."""
    out: dict[tuple[str, str], tuple[int, int]] = {}
    for name, items in asked_together(gateway, maybe_waiting_in(cluster, workloads)):
        if isinstance(items, NotFound):
            if "clusterqueues" in items.message and name in items.message:
                continue  # that queue is not in the cluster (yet)
            return out  # the API is not served
        if isinstance(items, KubeError):
            log.info("no queue positions: %s", items.message)
            return out
        for item in items:
            meta = item.get("metadata") or {}
            out[(meta.get("namespace", ""), meta.get("name", ""))] = (
                as_int(item.get("positionInClusterQueue")),
                as_int(item.get("positionInLocalQueue")),
            )
    return out
