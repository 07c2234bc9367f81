"""Usage history: what the portal saw at each sample, rolled up into hours and days.

Samples are compact aggregates (per team namespace and GPU resource, per ClusterQueue
flavor and resource, per node pool and resource), not per pod or node, so a day stays
bounded at any fleet size (bench/README.md states it). Names are stored as text so history
outlives the teams, queues and pools it describes.
"""

from __future__ import annotations

from django.db import models

from cluster.scope import ScopedManager, cluster_key

# A pool row of this flavor holds the GPUs the pool publishes through DRA (capacity, whole
# GPUs); team and pool rows of devices allocated through DRA name the DeviceClass they were
# allocated through as their flavor (blank: the device plugin). A class is a DNS name, so it
# is never this.
DRA_GPUS = "(dra)"


class Sample(models.Model):
    """One series' value at one sampling time. ``flavor``: a ClusterQueue's ResourceFlavor;
    on team and pool rows the DRA device class (``DRA_GPUS``: a pool's DRA GPUs), blank for
    the device plugin's."""

    class Kind(models.TextChoices):
        TEAM = "team", "Team namespace"
        QUEUE = "queue", "ClusterQueue"
        POOL = "pool", "Node pool"

    cluster = cluster_key(related_name="+")
    time = models.DateTimeField()
    kind = models.CharField(max_length=8, choices=Kind.choices)
    # team: team slug + namespace; queue: cluster queue + cohort + flavor; pool: pool name
    owner = models.CharField(max_length=253)
    scope = models.CharField(max_length=253, blank=True)
    flavor = models.CharField(max_length=253, blank=True)
    resource = models.CharField(max_length=128)
    # team: requested, allocated (running), pending pods, quota (hard, or -1: none)
    # queue: used, borrowed, lent (estimated), nominal; pool: allocated, allocatable
    used = models.FloatField(default=0)
    requested = models.FloatField(default=0)
    borrowed = models.FloatField(default=0)
    lent = models.FloatField(default=0)
    capacity = models.FloatField(default=-1, help_text="Quota, nominal or allocatable; -1: none.")
    pending = models.FloatField(default=0)
    gpu_share = models.FloatField(
        default=0, help_text="``used`` in whole GPUs (MIG profiles weighted by their share)."
    )

    objects = ScopedManager["Sample"]()

    class Meta:
        indexes = [
            models.Index(fields=["kind", "time"], name="usage_sample_kind_time"),
            models.Index(fields=["kind", "owner", "resource", "time"], name="usage_sample_series"),
        ]

    def __str__(self) -> str:
        return f"{self.time:%Y-%m-%d %H:%M} {self.kind} {self.owner} {self.resource}"


class Rollup(models.Model):
    """Sums over an hour or a day: every ``*_seconds`` is value x seconds covered, so an
    average is ``x_seconds / covered_seconds`` and an amount over time is ``x_seconds``."""

    class Period(models.TextChoices):
        HOUR = "hour"
        DAY = "day"

    cluster = cluster_key(related_name="+")
    period = models.CharField(max_length=4, choices=Period.choices)
    start = models.DateTimeField()
    kind = models.CharField(max_length=8, choices=Sample.Kind.choices)
    owner = models.CharField(max_length=253)
    scope = models.CharField(max_length=253, blank=True)
    flavor = models.CharField(max_length=253, blank=True)
    resource = models.CharField(max_length=128)
    covered_seconds = models.FloatField(default=0)
    used_seconds = models.FloatField(default=0)
    requested_seconds = models.FloatField(default=0)
    borrowed_seconds = models.FloatField(default=0)
    lent_seconds = models.FloatField(default=0)
    capacity_seconds = models.FloatField(default=0)
    pending_seconds = models.FloatField(default=0)
    gpu_seconds = models.FloatField(default=0)
    peak_used = models.FloatField(default=0)

    objects = ScopedManager["Rollup"]()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=[
                    "cluster",
                    "period",
                    "start",
                    "kind",
                    "owner",
                    "scope",
                    "flavor",
                    "resource",
                ],
                name="usage_rollup_once",
            )
        ]
        indexes = [models.Index(fields=["period", "kind", "start"], name="usage_rollup_range")]

    def __str__(self) -> str:
        return f"{self.period} {self.start:%Y-%m-%d %H:%M} {self.kind} {self.owner} {self.resource}"


class WorkloadRecord(models.Model):
    """A Kueue workload's life: created, admitted, finished. Its wait is admitted - queued:
    queued is its creation or, after Kueue evicted and requeued it, the requeue (the time it
    ran before the eviction is no wait), and admitted is then its latest admission."""

    cluster = cluster_key(related_name="+")
    namespace = models.CharField(max_length=63)
    name = models.CharField(max_length=253)
    uid = models.CharField(max_length=64, blank=True)
    local_queue = models.CharField(max_length=253, blank=True)
    cluster_queue = models.CharField(max_length=253, blank=True)
    created_at = models.DateTimeField()
    queued_at = models.DateTimeField(
        null=True, blank=True, help_text="Since when it waits (null: since its creation)."
    )
    admitted_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    gpu_share = models.FloatField(default=0)

    objects = ScopedManager["WorkloadRecord"]()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["cluster", "namespace", "name", "created_at"], name="usage_workload_once"
            )
        ]
        indexes = [models.Index(fields=["cluster_queue", "admitted_at"], name="usage_wl_admitted")]

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"


class SamplingState(models.Model):
    """When the last sample was taken and which hours were rolled up (one row)."""

    last_sample = models.DateTimeField(null=True, blank=True)
    rolled_up_to = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"sampled {self.last_sample}, rolled up to {self.rolled_up_to}"
