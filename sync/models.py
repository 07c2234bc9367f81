"""What the applier sent and what the cluster answered, and a record of every poll."""

from __future__ import annotations

from django.db import models


class AppliedObject(models.Model):
    """The last apply of one desired object: what was sent (hash) and how it went."""

    class Outcome(models.TextChoices):
        PENDING = "pending", "Pending"
        APPLIED = "applied", "Applied"
        CONFLICT = "conflict", "Conflict (owned by another manager)"
        FAILED = "failed", "Failed (refused by the cluster)"
        RETRYING = "retrying", "Retrying (cluster unreachable)"

    api_version = models.CharField(max_length=100)
    kind = models.CharField(max_length=63)
    namespace = models.CharField(max_length=63, blank=True)
    name = models.CharField(max_length=253)
    content_hash = models.CharField(max_length=64, blank=True)
    outcome = models.CharField(max_length=16, choices=Outcome.choices, default=Outcome.PENDING)
    message = models.TextField(blank=True)
    attempts = models.PositiveIntegerField(default=0)
    last_attempt_at = models.DateTimeField(null=True, blank=True)
    applied_at = models.DateTimeField(null=True, blank=True)
    resource_version = models.CharField(max_length=32, blank=True)
    adopted = models.BooleanField(
        default=False,
        help_text="It existed before the portal applied it: on removal the portal only gives "
        "up its fields and never deletes it.",
    )

    class Meta:
        ordering = ["kind", "namespace", "name"]
        constraints = [
            models.UniqueConstraint(
                fields=["kind", "namespace", "name"], name="applied_object_once"
            )
        ]

    def __str__(self) -> str:
        where = f"{self.namespace}/" if self.namespace else ""
        return f"{self.kind} {where}{self.name}"


class ObservedObject(models.Model):
    """A portal-managed object as the last poll saw it (spec and status)."""

    api_version = models.CharField(max_length=100)
    kind = models.CharField(max_length=63)
    namespace = models.CharField(max_length=63, blank=True)
    name = models.CharField(max_length=253)
    spec = models.JSONField(default=dict)
    status = models.JSONField(default=dict)
    resource_version = models.CharField(max_length=32, blank=True)
    changed_by = models.JSONField(
        default=list, help_text="Other writers from managedFields: manager, operation, time."
    )
    last_seen = models.DateTimeField()

    class Meta:
        ordering = ["kind", "namespace", "name"]
        constraints = [
            models.UniqueConstraint(
                fields=["kind", "namespace", "name"], name="observed_object_once"
            )
        ]

    def __str__(self) -> str:
        where = f"{self.namespace}/" if self.namespace else ""
        return f"{self.kind} {where}{self.name}"


class SyncRun(models.Model):
    """One poll of the cluster."""

    started_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)
    duration_ms = models.PositiveIntegerField(null=True, blank=True)
    nodes = models.PositiveIntegerField(default=0)
    pods = models.PositiveIntegerField(default=0)
    changed = models.PositiveIntegerField(default=0)
    error = models.TextField(blank=True)

    class Meta:
        ordering = ["-started_at"]

    def __str__(self) -> str:
        return f"sync at {self.started_at:%Y-%m-%d %H:%M:%S}"

    @property
    def ok(self) -> bool:
        return self.finished_at is not None and not self.error
