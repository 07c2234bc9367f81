"""Platform-wide models: platform roles and the append-only audit log."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class PlatformRole(models.Model):
    """A platform-wide role held by a user.

    ``admin`` manages flavors, queues, cohorts, priority classes and every team;
    ``approver`` decides change requests (never their own).
    """

    class Role(models.TextChoices):
        ADMIN = "admin", "Platform admin"
        APPROVER = "approver", "Approver"

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="platform_roles"
    )
    role = models.CharField(max_length=16, choices=Role.choices)
    granted_by = models.CharField(
        max_length=8,
        choices=[("portal", "In the portal"), ("sso", "Single sign-on groups")],
        default="portal",
        help_text="Roles from single sign-on follow the IdP's groups at every sign-in.",
    )

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["user", "role"], name="platform_role_once_per_user")
        ]

    def __str__(self) -> str:
        return f"{self.user} is {self.get_role_display()}"


class AuditEvent(models.Model):
    """One change, request or decision; written by services in their transaction, never edited."""

    class Source(models.TextChoices):
        WEB = "web", "Web"
        API = "api", "API"
        TASK = "task", "Worker"
        CLI = "cli", "CLI"
        ADMIN = "admin", "Admin"
        SSO = "sso", "Single sign-on"

    time = models.DateTimeField(auto_now_add=True, db_index=True)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    actor_name = models.CharField(max_length=150, blank=True)
    team = models.ForeignKey(
        "tenants.Team", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    team_name = models.CharField(
        max_length=100, blank=True, help_text="The team's slug, kept when the team is deleted."
    )
    event = models.CharField(max_length=64)
    target_type = models.CharField(max_length=64, blank=True)
    target_id = models.CharField(max_length=64, blank=True)
    target_repr = models.CharField(max_length=200, blank=True)
    old = models.JSONField(null=True, blank=True)
    new = models.JSONField(null=True, blank=True)
    source = models.CharField(max_length=8, choices=Source.choices)
    request_id = models.CharField(max_length=64, blank=True)
    cause = models.CharField(
        max_length=96,
        blank=True,
        help_text="The reviewed request this change carries out (app_label.model:id), if any.",
    )

    class Meta:
        ordering = ["-time", "-id"]
        indexes = [models.Index(fields=["team", "event", "time"], name="audit_team_event_time")]

    def __str__(self) -> str:
        return f"{self.time:%Y-%m-%d %H:%M:%S} {self.actor_name or 'system'} {self.event}"


class ApiToken(models.Model):
    """A personal API token: stored hashed, shown once, named, expiring, revocable."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens"
    )
    name = models.CharField(max_length=100)
    prefix = models.CharField(max_length=12, unique=True)
    digest = models.CharField(max_length=64)
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"


class IdempotencyRecord(models.Model):
    """The response to a POST sent with an ``Idempotency-Key``: a replay gets it again."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    key = models.CharField(max_length=200)
    method = models.CharField(max_length=8)
    path = models.CharField(max_length=500)
    body_digest = models.CharField(
        max_length=64, blank=True, help_text="SHA-256 of the first request's body."
    )
    status = models.PositiveSmallIntegerField(
        default=0, help_text="0 while the first request runs."
    )
    body = models.JSONField(null=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["user", "key"], name="one_idempotency_key_per_user")
        ]

    def __str__(self) -> str:
        return f"{self.method} {self.path} ({self.key})"


class OutboxMessage(models.Model):
    """A task to hand to the broker, written in the transaction that decided it: published
    when that transaction commits, and again by the relay while the broker was away."""

    task = models.CharField(max_length=200, help_text="The Celery task's name.")
    args = models.JSONField(default=list)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    sent_at = models.DateTimeField(null=True, blank=True)
    attempts = models.PositiveIntegerField(default=0)
    last_error = models.TextField(blank=True)

    class Meta:
        indexes = [
            models.Index(
                fields=["created_at"], name="outbox_unsent", condition=models.Q(sent_at=None)
            )
        ]

    def __str__(self) -> str:
        return f"{self.task}{tuple(self.args)}"


class NotificationSubscription(models.Model):
    """Which kinds of events reach one person, for one team (or every team), and how.

    A team lead subscribes for their teams; platform admins and approvers for any team or
    all of them. ``target`` is an e-mail address or a webhook URL: a webhook URL is a
    secret (whoever has it posts to the channel), so it is never shown back in full.
    """

    class Channel(models.TextChoices):
        PORTAL = "portal", "In the portal only"
        EMAIL = "email", "E-mail"
        SLACK = "slack", "Slack (incoming webhook)"
        TEAMS = "teams", "Microsoft Teams (incoming webhook or Workflows)"
        WEBHOOK = "webhook", "Webhook (JSON)"

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        related_name="notification_subscriptions",
    )
    team = models.ForeignKey(
        "tenants.Team",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="+",
        help_text="Empty: every team (platform admins and approvers only).",
    )
    kinds = models.JSONField(default=list, help_text="The kinds of events, e.g. ['decision'].")
    channel = models.CharField(max_length=8, choices=Channel.choices)
    target = models.CharField(
        max_length=2000, blank=True, help_text="An e-mail address or a webhook URL."
    )
    created_at = models.DateTimeField(auto_now_add=True)
    last_sent_at = models.DateTimeField(null=True, blank=True)
    last_error = models.CharField(max_length=500, blank=True)

    class Meta:
        ordering = ["user", "id"]
        indexes = [models.Index(fields=["team"], name="notify_sub_team")]

    def __str__(self) -> str:
        return f"{self.user} via {self.channel} ({self.team or 'every team'})"


class NotificationPreference(models.Model):
    """Whether a person is told of the events that concern them without a subscription
    (their own requests decided and ended, the changes that hit their teams): on unless
    they turned it off. No row: on."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        primary_key=True,
        related_name="notification_preference",
    )
    told_by_default = models.BooleanField(
        default=True,
        help_text="Off: only the person's own subscriptions reach them.",
    )
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"{self.user}: {'told' if self.told_by_default else 'not told'} by default"


class Notification(models.Model):
    """One event as one person reads it in the portal (their notifications list)."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="notifications"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    event = models.CharField(max_length=64)
    kind = models.CharField(max_length=16)
    title = models.CharField(max_length=300)
    text = models.TextField(blank=True)
    url = models.CharField(max_length=500, blank=True)
    team = models.CharField(max_length=63, blank=True, help_text="The team's slug.")
    read_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["user", "-created_at"], name="notification_user_time"),
            models.Index(
                fields=["user"], name="notification_unread", condition=models.Q(read_at=None)
            ),
        ]

    def __str__(self) -> str:
        return f"{self.user}: {self.title}"
