"""Recording how busy each team's GPUs were, from the DCGM readings GPU health keeps (per
GPU and per MIG instance, with the pod's namespace where the exporter maps pods).

Each run adds, for every device a fresh reading names a namespace and a utilisation of, the
time since the last run (at most QM_SAMPLE_MAX_GAP_SECONDS) to that namespace's day: busy
GPU-seconds (utilisation x the device's share of a GPU x seconds) and device-seconds read. A
device without a namespace, or without a utilisation, or a node whose reading is older than
the gap, adds nothing: its hours stay "not read". The interval is counted on the day the run
happens (one that crosses midnight, at most the gap, lands on the new day)."""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from costs.models import BusyDay, BusyState
from costs.pricing import GPU
from gpus.catalog import model_for_product, resource_name
from health.models import NodeHealth
from usage.compute import mig_weight


def _devices(gpu: dict[str, Any]) -> list[tuple[str, str, float, float]]:
    """(namespace, resource, utilisation %, share of a GPU) of each device of one GPU
    reading that names a namespace and a utilisation."""
    model = model_for_product(str(gpu.get("model") or "").replace(" ", "-"))
    instances = gpu.get("instances") or []
    out = []
    for inst in instances:
        if inst.get("namespace") and inst.get("util") is not None:
            resource = resource_name(str(inst.get("profile", "")))
            out.append(
                (inst["namespace"], resource, float(inst["util"]), mig_weight(model, resource))
            )
    if not instances and gpu.get("namespace") and gpu.get("util") is not None:
        out.append((gpu["namespace"], GPU, float(gpu["util"]), 1.0))
    return out


@transaction.atomic
def record_busy(*, now: dt.datetime | None = None) -> int:
    """Add the time since the last run to each read device's namespace and day; the number of
    rows written. The first run only starts the clock."""
    now = now or timezone.now()
    gap = float(settings.QM_SAMPLE_MAX_GAP_SECONDS)
    state = BusyState.objects.select_for_update().first() or BusyState.objects.create()
    last, state.last_read = state.last_read, now
    state.save(update_fields=["last_read"])
    seconds = min((now - last).total_seconds(), gap) if last is not None else 0.0
    if seconds <= 0:
        return 0
    added: dict[tuple[int, str, str], list[float]] = defaultdict(lambda: [0.0, 0.0])
    fresh = NodeHealth.objects.on_every_cluster().filter(
        observed_at__gte=now - dt.timedelta(seconds=gap), error=""
    )
    for cluster_id, gpus in fresh.values_list("cluster_id", "gpus"):
        for gpu in gpus or []:
            for namespace, resource, util, share in _devices(gpu):
                sums = added[(int(cluster_id or 0), namespace, resource)]
                sums[0] += util / 100 * share * seconds
                sums[1] += seconds
    day = now.astimezone(dt.UTC).date()
    rows = {
        (r.cluster_id, r.namespace, r.resource): r
        for r in BusyDay.objects.on_every_cluster().filter(day=day)
    }
    new, changed = [], []
    for (cluster_id, namespace, resource), (busy, read) in added.items():
        row = rows.get((cluster_id, namespace, resource))
        if row is None:
            new.append(
                BusyDay(
                    cluster_id=cluster_id,
                    day=day,
                    namespace=namespace,
                    resource=resource,
                    busy_seconds=busy,
                    read_seconds=read,
                )
            )
        else:
            row.busy_seconds += busy
            row.read_seconds += read
            changed.append(row)
    BusyDay.objects.bulk_create(new)
    BusyDay.objects.bulk_update(changed, ["busy_seconds", "read_seconds"])
    return len(new) + len(changed)
