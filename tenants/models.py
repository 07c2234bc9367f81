"""Tenants: teams, their members and namespaces, namespace quotas and container limits,
and the platform's PriorityClass catalog."""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models

from cluster.scope import ScopedManager, cluster_key, unique_per_cluster
from portal.vocabulary.validators import validate_dns1123_label, validate_dns1123_subdomain
from tenants.rules import (
    LIMIT_TYPES,
    LimitSpec,
    check_limit,
    check_quota_item,
    limit_range_pitfalls,
    stored_limit,
)

# Kubernetes refuses user PriorityClasses above one billion (higher is for system-* classes).
HIGHEST_USER_PRIORITY = 1_000_000_000
LOWEST_PRIORITY = -2_147_483_648


class PriorityClass(models.Model):
    """A PriorityClass in the platform catalog; teams may use the subset they are allowed."""

    class Preemption(models.TextChoices):
        PREEMPT_LOWER = "PreemptLowerPriority", "PreemptLowerPriority"
        NEVER = "Never", "Never"

    name = models.CharField(max_length=253, unique=True, validators=[validate_dns1123_subdomain])
    value = models.IntegerField(
        help_text=f"Higher runs first; at most {HIGHEST_USER_PRIORITY:,} for non-system classes."
    )
    preemption_policy = models.CharField(
        max_length=32, choices=Preemption.choices, default=Preemption.PREEMPT_LOWER
    )
    global_default = models.BooleanField(
        default=False, help_text="Pods without a priorityClassName get this class. At most one."
    )
    description = models.TextField(blank=True)
    clusters = models.ManyToManyField(
        "cluster.Cluster",
        blank=True,
        related_name="priority_classes",
        help_text="The clusters it is applied to; none chosen: every cluster.",
    )

    class Meta:
        ordering = ["-value", "name"]
        verbose_name_plural = "priority classes"
        constraints = [
            models.UniqueConstraint(
                fields=["global_default"],
                condition=models.Q(global_default=True),
                name="at_most_one_global_default_priority_class",
                violation_error_message=(
                    "Another PriorityClass is already the global default; "
                    "clear it there first (Kubernetes allows only one)."
                ),
            )
        ]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        errors: dict[str, str] = {}
        if self.name.startswith("system-"):
            errors["name"] = "Names starting with 'system-' are reserved by Kubernetes."
        if self.value is not None and not LOWEST_PRIORITY <= self.value <= HIGHEST_USER_PRIORITY:
            errors["value"] = (
                f"Must be between {LOWEST_PRIORITY:,} and {HIGHEST_USER_PRIORITY:,}; "
                "higher values are reserved for system-* classes."
            )
        if errors:
            raise ValidationError(errors)


class Team(models.Model):
    """A tenant: a group of people with namespaces, quotas and queues."""

    slug = models.CharField(
        max_length=63,
        unique=True,
        validators=[validate_dns1123_label],
        help_text="Lowercase letters, digits and '-'; used in labels and object names.",
    )
    name = models.CharField(max_length=100)
    description = models.TextField(blank=True)
    allowed_priority_classes = models.ManyToManyField(
        PriorityClass, blank=True, related_name="teams"
    )

    class Meta:
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.slug


class Membership(models.Model):
    """A user's role in a team: lead (tenant admin), member, or viewer (read-only)."""

    class Role(models.TextChoices):
        LEAD = "lead", "Lead"
        MEMBER = "member", "Member"
        VIEWER = "viewer", "Viewer"

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships"
    )
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=8, choices=Role.choices, default=Role.MEMBER)
    granted_by = models.CharField(
        max_length=8,
        choices=[("portal", "In the portal"), ("sso", "Single sign-on groups")],
        default="portal",
        help_text="Memberships from single sign-on follow the IdP's groups at every sign-in.",
    )

    class Meta:
        ordering = ["team", "user"]
        constraints = [
            models.UniqueConstraint(fields=["user", "team"], name="one_membership_per_team")
        ]

    def __str__(self) -> str:
        return f"{self.user} ({self.role} of {self.team})"


class SsoIdentity(models.Model):
    """Who a single sign-on account is: the IdP (its issuer) and its subject, the one claim
    an IdP never reuses or lets a user change. ``preferred_username`` only names a new
    account; matching on it would hand an account to whoever renames themselves at the IdP."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="sso_identities"
    )
    issuer = models.CharField(max_length=500)
    subject = models.CharField(max_length=255)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["issuer", "subject"], name="one_account_per_identity")
        ]

    def __str__(self) -> str:
        return f"{self.subject} at {self.issuer}"


class Namespace(models.Model):
    """A Kubernetes namespace owned by exactly one team."""

    cluster = cluster_key(related_name="namespaces")
    name = models.CharField(max_length=63, validators=[validate_dns1123_label])
    team = models.ForeignKey(Team, on_delete=models.PROTECT, related_name="namespaces")
    description = models.TextField(blank=True)

    objects = ScopedManager["Namespace"]()

    class Meta:
        ordering = ["name", "cluster"]
        constraints = [
            unique_per_cluster("namespace_once_per_cluster", "namespace"),
        ]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        if self.name.startswith("kube-") or self.name in {"default", "kube-system"}:
            raise ValidationError(
                {"name": "Names starting with 'kube-' and 'default' belong to the cluster."}
            )

    @property
    def quota_name(self) -> str:
        return f"{self.name}-gpu-quota"

    @property
    def limit_range_name(self) -> str:
        return f"{self.name}-gpu-defaults"

    @property
    def limit_range_warnings(self) -> list[str]:
        """What the LimitRange's items do together (its items' own warnings are theirs)."""
        return limit_range_pitfalls([item.spec() for item in self.limit_items.all()])


class QuotaItem(models.Model):
    """One ``ResourceQuota.spec.hard`` entry of a namespace (``requests.nvidia.com/gpu: 16``)."""

    namespace = models.ForeignKey(Namespace, on_delete=models.CASCADE, related_name="quota_items")
    resource = models.CharField(max_length=253)
    hard = models.CharField(max_length=64, help_text="A quantity: 16, 500m, 64Gi.")

    class Meta:
        ordering = ["namespace", "resource"]
        constraints = [
            models.UniqueConstraint(
                fields=["namespace", "resource"],
                name="one_quota_item_per_resource",
                violation_error_message="This namespace already has a quota for this resource.",
            )
        ]

    def __str__(self) -> str:
        return f"{self.namespace}: {self.resource}={self.hard}"

    def clean(self) -> None:
        _raise_field_errors(check_quota_item(self.resource, self.hard).errors)

    @property
    def warnings(self) -> list[str]:
        return check_quota_item(self.resource, self.hard).warnings


class LimitRangeItem(models.Model):
    """One resource's defaults and bounds in a namespace's LimitRange."""

    namespace = models.ForeignKey(Namespace, on_delete=models.CASCADE, related_name="limit_items")
    limit_type = models.CharField(
        max_length=16, choices=[(t, t) for t in LIMIT_TYPES], default="Container"
    )
    resource = models.CharField(max_length=253)
    default = models.CharField(max_length=64, blank=True, help_text="Default limit.")
    default_request = models.CharField(max_length=64, blank=True)
    max = models.CharField(max_length=64, blank=True)
    min = models.CharField(max_length=64, blank=True)

    class Meta:
        ordering = ["namespace", "limit_type", "resource"]
        constraints = [
            models.UniqueConstraint(
                fields=["namespace", "limit_type", "resource"],
                name="one_limit_per_type_and_resource",
                violation_error_message="This namespace already limits this resource.",
            )
        ]

    def __str__(self) -> str:
        return f"{self.namespace}: {self.limit_type} {self.resource}"

    def spec(self) -> LimitSpec:
        return LimitSpec(
            limit_type=self.limit_type,
            resource=self.resource,
            default=self.default,
            default_request=self.default_request,
            max=self.max,
            min=self.min,
        )

    def clean(self) -> None:
        _raise_field_errors(check_limit(self.spec()).errors)

    @property
    def warnings(self) -> list[str]:
        return check_limit(self.spec()).warnings

    @property
    def default_shown(self) -> str:
        """The default the API server stores: the one set, or the max it copies ("2, from max")."""
        stored = stored_limit(self.spec()).default
        return self.default or (f"{stored}, from max" if stored else "")

    @property
    def default_request_shown(self) -> str:
        """The default request the API server stores, and where it comes from when unset."""
        if self.default_request:
            return self.default_request
        stored = stored_limit(self.spec()).default_request
        if not stored:
            return ""
        source = "default" if self.default else ("max" if self.max else "min")
        return f"{stored}, from {source}"


def _raise_field_errors(messages: list[str]) -> None:
    """Turn ``"field: message"`` strings from the rules into a field-keyed ValidationError."""
    if not messages:
        return
    by_field: dict[str, list[str]] = {}
    for message in messages:
        name, sep, text = message.partition(": ")
        if sep and name.isidentifier():
            by_field.setdefault(name, []).append(text)
        else:
            by_field.setdefault("__all__", []).append(message)
    raise ValidationError(by_field)


class MigPolicy(models.Model):
    """A cluster's policy for MIG devices carved per claim (DRA): whether it is governed,
    and what each namespace may claim (its ``grants``). Governed, the portal keeps one
    DeviceClass per MIG profile and a ResourceQuota per namespace that allows the granted
    profiles' classes and closes every other class of MIG devices; not governed (MIG
    pre-configured by MIG Manager or the driver's static MIG), it renders nothing and the
    MIG change flow stays the way to get profiles. Changed only by an approved policy change
    (``changes.mig_policy``)."""

    cluster = models.OneToOneField(
        "cluster.Cluster", on_delete=models.PROTECT, related_name="mig_policy"
    )
    governed = models.BooleanField(default=False)
    profiles = models.JSONField(
        default=list,
        help_text="The MIG profiles the portal keeps a DeviceClass for: those the cluster's "
        "GPUs offered when the policy was approved, and every granted one.",
    )
    changed_at = models.DateTimeField(null=True, blank=True)

    objects = ScopedManager["MigPolicy"]()

    class Meta:
        verbose_name_plural = "MIG policies"

    def __str__(self) -> str:
        return f"MIG policy of {self.cluster}"


class MigGrant(models.Model):
    """What one namespace may hold at once of one MIG profile under its cluster's policy:
    ``devices`` MIG devices of the profile's DeviceClass (a ResourceQuota counts devices per
    class, per namespace; Kubernetes has no quota over a team's namespaces together)."""

    policy = models.ForeignKey(MigPolicy, on_delete=models.CASCADE, related_name="grants")
    namespace = models.ForeignKey(Namespace, on_delete=models.CASCADE, related_name="mig_grants")
    profile = models.CharField(max_length=32)
    devices = models.PositiveIntegerField()

    class Meta:
        ordering = ["namespace__name", "profile"]
        constraints = [
            models.UniqueConstraint(
                fields=["namespace", "profile"],
                name="one_mig_grant_per_profile",
                violation_error_message="This namespace already has a grant of this profile.",
            )
        ]

    def __str__(self) -> str:
        return f"{self.namespace}: {self.devices} of {self.profile}"
