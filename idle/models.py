"""Idle GPUs: each allocated device's run under its pool's threshold, the idle spells found
from them (per Kueue workload, or per pod without one), and each team's suspension policy."""

from __future__ import annotations

import datetime as dt

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Q
from django.utils import timezone

from cluster.scope import ScopedManager, cluster_key


class DeviceRun(models.Model):
    """One GPU or MIG instance of a node: its last DCGM reading, the pod it is given to and
    since when its readings stayed under its pool's threshold without a gap
    (``idle.runs``). One row per device, replaced at each health collection."""

    cluster = cluster_key(related_name="device_runs")
    node = models.CharField(max_length=253)
    gpu = models.PositiveSmallIntegerField()
    instance = models.PositiveSmallIntegerField(default=0, help_text="MIG instance; 0: whole GPU.")
    profile = models.CharField(max_length=32, blank=True)
    namespace = models.CharField(max_length=63, blank=True)
    pod = models.CharField(max_length=253, blank=True)
    read_at = models.DateTimeField()
    util = models.FloatField(null=True, blank=True)
    low_since = models.DateTimeField(null=True, blank=True)
    threshold = models.FloatField()
    peak = models.FloatField(null=True, blank=True)

    objects = ScopedManager["DeviceRun"]()

    class Meta:
        ordering = ["node", "gpu", "instance"]
        constraints = [
            models.UniqueConstraint(
                fields=["cluster", "node", "gpu", "instance"], name="device_run_once"
            )
        ]

    def __str__(self) -> str:
        return f"{self.node}/{self.gpu}/{self.instance}"


class IdleSpell(models.Model):
    """A workload (or a pod without one) whose every GPU and MIG instance was idle for its
    pool's period: open while it stays so, ended when one is used again, is not read, or
    the pods are gone."""

    cluster = cluster_key(related_name="idle_spells")
    team = models.ForeignKey(
        "tenants.Team", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    namespace = models.CharField(max_length=63)
    workload = models.CharField(max_length=253, blank=True, help_text="Its Kueue Workload.")
    pod = models.CharField(max_length=253, help_text="Its first pod (the only one, mostly).")
    pods = models.PositiveIntegerField(default=1)
    pool = models.CharField(max_length=63, blank=True)
    gpus = models.FloatField(help_text="GPUs held: whole GPUs, MIG instances as their share.")
    devices = models.JSONField(default=list)
    threshold = models.FloatField()
    idle_since = models.DateTimeField(help_text="Since when every device was under threshold.")
    found_at = models.DateTimeField()
    last_seen = models.DateTimeField(help_text="The last reading that found it idle.")
    ended_at = models.DateTimeField(null=True, blank=True)
    suspended_at = models.DateTimeField(null=True, blank=True)
    note = models.CharField(
        max_length=300, blank=True, help_text="Why the policy did not suspend it, if it did not."
    )

    objects = ScopedManager["IdleSpell"]()

    class Meta:
        ordering = ["-idle_since", "namespace", "workload", "pod"]
        constraints = [
            models.UniqueConstraint(
                fields=["cluster", "namespace", "workload", "pod"],
                condition=Q(ended_at__isnull=True),
                name="idle_spell_open_once",
            )
        ]
        indexes = [models.Index(fields=["cluster", "ended_at"], name="idle_spell_open")]

    def __str__(self) -> str:
        return f"{self.namespace}/{self.workload or self.pod}"

    def gpu_hours(self, now: dt.datetime | None = None) -> float:
        """GPU-hours wasted so far (till its end): the GPUs it holds times the hours idle.
        Their money is the list's (``idle.selectors.Row.cost``, priced by costs/)."""
        end = self.ended_at or now or timezone.now()
        return round(self.gpus * max(0.0, (end - self.idle_since).total_seconds()) / 3600, 2)


class IdlePolicy(models.Model):
    """A team's choice to have idle Kueue workloads suspended (``spec.active: false``) after
    a grace period. Off by default; the first switch-on waits for a second person (another
    platform admin, or the team's lead) to approve it."""

    class State(models.TextChoices):
        OFF = "off", "Off"
        AWAITING = "awaiting", "Awaiting approval"
        ON = "on", "On"

    team = models.OneToOneField(
        "tenants.Team", on_delete=models.CASCADE, related_name="idle_policy"
    )
    state = models.CharField(max_length=8, choices=State.choices, default=State.OFF)
    grace_minutes = models.PositiveIntegerField(
        default=60,
        validators=[MinValueValidator(0), MaxValueValidator(7 * 24 * 60)],
        help_text="How long after it is found idle (and the team told) a workload is suspended.",
    )
    exempt_namespaces = models.JSONField(default=list, blank=True)
    exempt_priority_classes = models.JSONField(default=list, blank=True)
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    requested_at = models.DateTimeField(null=True, blank=True)
    approved_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    approved_at = models.DateTimeField(
        null=True, blank=True, help_text="The first switch-on's approval; later ones need none."
    )

    class Meta:
        verbose_name_plural = "idle policies"

    def __str__(self) -> str:
        return f"{self.team}: {self.state}"
