"""``manage.py backfill_usage [--days 14]``: history for the demo, so the Usage page has
charts right away. Takes today's observed state as the shape of every series and varies it
with the working day; only when there is no history yet (``--force`` adds anyway)."""

from __future__ import annotations

import datetime as dt
import math
import random
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser
from django.utils import timezone

from cluster.models import Cluster
from usage.compute import mig_weight
from usage.models import Sample, WorkloadRecord
from usage.sampling import fleet_models, pool_rows, queue_rows, roll_up, team_rows


def _load(time: dt.datetime, seed: int) -> float:
    """Busier in working hours, quieter at night and at the weekend (0.1 .. 1)."""
    hour = time.hour + time.minute / 60
    day = 0.5 - 0.5 * math.cos((hour - 3) / 24 * 2 * math.pi)
    weekend = 0.55 if time.weekday() >= 5 else 1.0
    noise = random.Random(f"{seed}:{time:%Y%m%d%H}").uniform(-0.08, 0.08)
    return max(0.1, min(1.0, (0.25 + 0.7 * day) * weekend + noise))


class Command(BaseCommand):
    help = "Backfill usage history from the current observed state (the demo)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--days", type=int, default=14)
        parser.add_argument("--force", action="store_true")

    def handle(self, *args: Any, **options: Any) -> None:
        if Sample.objects.exists() and not options["force"]:
            self.stdout.write("usage history exists: nothing backfilled")
            return
        now = timezone.now().replace(second=0, microsecond=0)
        step = dt.timedelta(seconds=settings.QM_SAMPLE_SECONDS)
        start = now - dt.timedelta(days=options["days"])
        cluster_ids = list(Cluster.objects.values_list("pk", flat=True))
        models: dict[int | None, list[str]] = {c: fleet_models(c) for c in cluster_ids}
        teams = [row for c in cluster_ids for row in team_rows(now, c)]
        queues = [row for c in cluster_ids for row in queue_rows(now, c)]
        pools = [row for c in cluster_ids for row in pool_rows(now, c)]
        rows = []
        time = start
        while time < now:
            for index, base in enumerate(teams + queues + pools):
                load = _load(time, index)
                top = base.capacity if base.capacity > 0 else max(base.requested, base.used, 1)
                used = round(top * load) if base.kind != "queue" or base.capacity else base.used
                share = base.gpu_share / base.used if base.used else _share(base, models)
                # a queue in no cohort (no scope) neither borrows nor lends
                in_cohort = base.kind == "queue" and bool(base.scope)
                rows.append(
                    Sample(
                        cluster_id=base.cluster_id,
                        time=time,
                        kind=base.kind,
                        owner=base.owner,
                        scope=base.scope,
                        flavor=base.flavor,
                        resource=base.resource,
                        used=used,
                        requested=used + (1 if load > 0.85 else 0),
                        pending=1 if load > 0.85 else 0,
                        capacity=base.capacity,
                        borrowed=max(0.0, used - base.capacity) if in_cohort else 0,
                        lent=max(0.0, base.capacity - used) * 0.2 if in_cohort else 0,
                        gpu_share=used * share,
                    )
                )
            time += step
        Sample.objects.bulk_create(rows, batch_size=5000)
        waits = random.Random(7)
        records = []
        for cluster_id, cq in sorted({(q.cluster_id, q.owner) for q in queues}):
            day = start
            while day < now:
                for job in range(6):
                    created = day + dt.timedelta(hours=waits.uniform(0, 23))
                    wait = dt.timedelta(seconds=waits.lognormvariate(5.5, 1.1))
                    ran = dt.timedelta(minutes=waits.uniform(40, 160))  # estimated waits use it
                    if created + wait < now:
                        records.append(
                            WorkloadRecord(
                                cluster_id=cluster_id,
                                namespace="backfill",
                                name=f"{cq}-{day:%m%d}-{job}",
                                cluster_queue=cq,
                                created_at=created,
                                admitted_at=created + wait,
                                finished_at=created + wait + ran,
                            )
                        )
                day += dt.timedelta(days=1)
        WorkloadRecord.objects.bulk_create(records, ignore_conflicts=True)
        written = roll_up(now=now)
        self.stdout.write(
            f"backfilled {options['days']} days: {len(rows)} samples, {len(records)} workloads, "
            f"{written} rollups"
        )


def _share(sample: Sample, models: dict[int | None, list[str]]) -> float:
    """A device's share of a GPU on the sample's cluster (a MIG slice weighed by the GPU
    models that cluster has most of: ``models``, per cluster)."""
    return mig_weight(None, sample.resource, models[sample.cluster_id])
