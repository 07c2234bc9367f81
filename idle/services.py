"""Finding idle GPUs: each health collection's readings kept as per-device runs
(``idle.runs``), and the idle spells judged from them, per Kueue workload (or per pod
without one), the team told once per spell.

A fixed number of statements per collection whatever the number of devices: the pools, the
nodes' labels, the runs before, one upsert of the runs, one delete of runs not read for a
day, the pods and namespaces of what was read, the open spells, then one insert, one update
and one end of spells."""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from cluster.dra_held import DraHeld
from cluster.models import ObservedNode, ObservedPod
from fleet.membership import pool_of
from fleet.models import NodePool
from gpus.catalog import WHOLE_GPU_RESOURCES, resource_name
from health.models import NodeHealth
from idle import notify
from idle.models import DeviceRun, IdlePolicy, IdleSpell
from idle.runs import Reading, Run, gpu_weight, next_run, readings_of, state_of
from portal.infra import outbox
from tenants.models import Namespace

# Runs of devices not read for this long are forgotten (a node gone, a GPU re-sliced).
RETENTION = dt.timedelta(days=1)
ENFORCE_TASK = "idle.tasks.enforce_idle_policy_task"


def max_gap() -> dt.timedelta:
    """The longest wait between two readings of a device that keeps its run going: three
    collections (QM_HEALTH_SECONDS), at least three minutes."""
    return dt.timedelta(seconds=max(180, 3 * settings.QM_HEALTH_SECONDS))


@dataclass(frozen=True)
class PoolRule:
    name: str
    threshold: float
    period: dt.timedelta


DEFAULT_RULE = PoolRule("", 5.0, dt.timedelta(minutes=120))


def rules_by_node(cluster_id: int, nodes: Iterable[str]) -> dict[str, PoolRule]:
    """Each node's pool settings (a node in no pool: the defaults, 5 % over 2 hours). Two
    queries."""
    pools = list(NodePool.objects.on(cluster_id))
    labels = ObservedNode.objects.on(cluster_id).filter(name__in=list(nodes))
    out = {}
    for name, node_labels in labels.values_list("name", "labels"):
        pool = pool_of(node_labels or {}, pools)
        out[name] = (
            PoolRule(
                pool.name,
                float(pool.idle_threshold_percent),
                dt.timedelta(minutes=pool.idle_period_minutes),
            )
            if pool is not None
            else DEFAULT_RULE
        )
    return out


def _as_run(row: DeviceRun) -> Run:
    return Run(
        row.namespace, row.pod, row.read_at, row.util, row.low_since, row.threshold, row.peak
    )


def record_readings(
    cluster_id: int, rows: Iterable[NodeHealth], *, now: dt.datetime | None = None
) -> list[IdleSpell]:
    """Keep each device's run after this collection (``rows``: the nodes read), judge which
    workloads are idle now, and tell their teams of those newly found; the spells found."""
    now = now or timezone.now()
    readings = [r for row in rows if not row.error for r in readings_of(row.node, row.gpus)]
    if not readings:
        return []
    nodes = {r.node for r in readings}
    rules = rules_by_node(cluster_id, nodes)
    before = {
        (r.node, r.gpu, r.instance): r
        for r in DeviceRun.objects.on(cluster_id).filter(node__in=list(nodes))
    }
    runs: dict[tuple[str, int, int], Run] = {}
    for reading in readings:
        old = before.get(reading.key)
        rule = rules.get(reading.node, DEFAULT_RULE)
        runs[reading.key] = next_run(
            _as_run(old) if old is not None else None,
            reading,
            threshold=rule.threshold,
            now=now,
            max_gap=max_gap(),
        )
    with transaction.atomic():
        DeviceRun.objects.bulk_create(
            [_row(cluster_id, reading, runs[reading.key]) for reading in readings],
            update_conflicts=True,
            unique_fields=["cluster", "node", "gpu", "instance"],
            update_fields=[
                "profile",
                "namespace",
                "pod",
                "read_at",
                "util",
                "low_since",
                "threshold",
                "peak",
            ],
        )
        DeviceRun.objects.on(cluster_id).filter(read_at__lt=now - RETENTION).delete()
        found = judge(cluster_id, readings, runs, rules, now=now)
        spells = _write_spells(cluster_id, found, now=now)
    return spells


def _row(cluster_id: int, reading: Reading, run: Run) -> DeviceRun:
    return DeviceRun(
        cluster_id=cluster_id,
        node=reading.node,
        gpu=reading.gpu,
        instance=reading.instance,
        profile=reading.profile,
        namespace=run.namespace,
        pod=run.pod,
        read_at=run.read_at,
        util=run.util,
        low_since=run.low_since,
        threshold=run.threshold,
        peak=run.peak,
    )


@dataclass
class Found:
    """One workload (or pod) whose every device is idle."""

    namespace: str
    workload: str
    pod: str
    pods: set[str] = field(default_factory=set)
    devices: list[dict[str, Any]] = field(default_factory=list)
    gpus: float = 0.0
    since: dt.datetime | None = None
    threshold: float = 0.0
    pool: str = ""


def judge(
    cluster_id: int,
    readings: list[Reading],
    runs: dict[tuple[str, int, int], Run],
    rules: dict[str, PoolRule],
    *,
    now: dt.datetime,
) -> dict[tuple[str, str, str], Found]:
    """The workloads (by namespace and name; a pod without one by its own name) all of whose
    GPU pods' devices were read now and are idle. A pod of the workload the poll saw running
    with GPUs but with no device read here is not read: its workload is not idle."""
    by_pod: dict[tuple[str, str], list[Reading]] = defaultdict(list)
    for reading in readings:
        if reading.pod:
            by_pod[(reading.namespace, reading.pod)].append(reading)
    if not by_pod:
        return {}
    namespaces = sorted({ns for ns, _ in by_pod})
    workload_of: dict[tuple[str, str], str] = {}
    pods_of: dict[tuple[str, str], set[str]] = defaultdict(set)
    # The running pods that hold GPUs, through the device plugin or through DRA claims (the
    # DeviceClass each device was allocated through is kept: its price may be its own).
    observed = (
        ObservedPod.objects.on(cluster_id)
        .filter(namespace__in=namespaces, phase="Running")
        .exclude(gpu_requests={}, resource_claims=[])
        .only("namespace", "name", "workload_name", "resource_claims")
    )
    claims = DraHeld(cluster_id)
    by_claims: dict[tuple[str, str], dict[tuple[str, str], int]] = {}
    for running in observed:
        workload_of[(running.namespace, running.name)] = running.workload_name
        if running.workload_name:
            pods_of[(running.namespace, running.workload_name)].add(running.name)
        if running.resource_claims:
            by_claims[(running.namespace, running.name)] = claims.of_pod(running)
    subjects: dict[tuple[str, str, str], Found] = {}
    not_idle: set[tuple[str, str, str]] = set()
    for (namespace, pod), devices in sorted(by_pod.items()):
        workload = workload_of.get((namespace, pod), "")
        key = (namespace, workload, "" if workload else pod)
        found = subjects.setdefault(key, Found(namespace, workload, key[2]))
        found.pods.add(pod)
        for reading in devices:
            run = runs[reading.key]
            rule = rules.get(reading.node, DEFAULT_RULE)
            if state_of(run, period=rule.period, now=now, max_gap=max_gap()) != "idle":
                not_idle.add(key)
            since = run.low_since or now
            found.since = since if found.since is None else max(found.since, since)
            found.gpus += gpu_weight(reading.profile)
            found.threshold, found.pool = rule.threshold, found.pool or rule.name
            device = {
                "node": reading.node,
                "gpu": reading.gpu,
                "instance": reading.instance,
                "profile": reading.profile,
                "pod": pod,
                "util": reading.util,
            }
            device_class = _claimed(by_claims.get((namespace, pod), {}), reading.profile)
            if device_class:
                device["device_class"] = device_class
            found.devices.append(device)
    for key, found in subjects.items():
        if found.workload and not pods_of[(found.namespace, found.workload)] <= found.pods:
            not_idle.add(key)  # a pod of it running on GPUs was not read
    return {key: found for key, found in subjects.items() if key not in not_idle}


def _claimed(held: dict[tuple[str, str], int], profile: str) -> str:
    """The DeviceClass a pod's device of ``profile`` (blank: a whole GPU) was allocated
    through, taken from what its claims hold (each device of them once); blank: none left,
    the device plugin gave it. DCGM names a device by its GPU index, which DRA devices do not
    publish, so a pod holding the same kind of device both ways is matched by count."""
    resource = resource_name(profile) if profile else WHOLE_GPU_RESOURCES[0]
    for (held_resource, device_class), count in sorted(held.items()):
        if held_resource == resource and device_class and count > 0:
            held[(held_resource, device_class)] = count - 1
            return device_class
    return ""


def _write_spells(
    cluster_id: int, found: dict[tuple[str, str, str], Found], *, now: dt.datetime
) -> list[IdleSpell]:
    """Open a spell for each newly found workload (its team told), keep the open ones found
    again, end the others."""
    open_spells = {
        (s.namespace, s.workload, s.pod): s
        for s in IdleSpell.objects.on(cluster_id).filter(ended_at__isnull=True)
    }
    teams = dict(
        Namespace.objects.on(cluster_id)
        .filter(name__in=sorted({f.namespace for f in found.values()}))
        .values_list("name", "team_id")
    )
    new, kept = [], []
    for key, item in found.items():
        values = {
            "pods": len(item.pods),
            "gpus": round(item.gpus, 3),
            "devices": item.devices,
            "threshold": item.threshold,
            "pool": item.pool,
            "last_seen": now,
        }
        spell = open_spells.pop(key, None)
        if spell is None:
            new.append(
                IdleSpell(
                    cluster_id=cluster_id,
                    team_id=teams.get(item.namespace),
                    namespace=item.namespace,
                    workload=item.workload,
                    pod=item.pod,
                    idle_since=item.since or now,
                    found_at=now,
                    **values,
                )
            )
            continue
        for name, value in values.items():
            setattr(spell, name, value)
        kept.append(spell)
    IdleSpell.objects.bulk_create(new)
    IdleSpell.objects.bulk_update(
        kept, ["pods", "gpus", "devices", "threshold", "pool", "last_seen"]
    )
    IdleSpell.objects.on(cluster_id).filter(pk__in=[s.pk for s in open_spells.values()]).update(
        ended_at=now
    )
    if new:
        transaction.on_commit(lambda: notify.found([s.pk for s in new]))
    if _policy_may_act(new + kept):
        outbox.send_later(ENFORCE_TASK, cluster_id, once=True)
    return new + kept


def _policy_may_act(spells: list[IdleSpell]) -> bool:
    """Whether a policy that is on covers one of ``spells`` (a workload not yet suspended):
    the enforcement then looks at the grace and the exemptions. One query."""
    teams = {
        s.team_id
        for s in spells
        if s.team_id is not None and s.workload and s.suspended_at is None and not s.note
    }
    return (
        bool(teams)
        and IdlePolicy.objects.filter(team_id__in=teams, state=IdlePolicy.State.ON).exists()
    )
