"""Reviewed changes: MIG changes and drains of GPU nodes, and quota requests, each with its
impact assessment, decision and (for node changes) its recorded execution steps.

The tables keep the names they had before changes had an app of their own (``db_table``):
an upgrade moves no data.
"""

from __future__ import annotations

from fractions import Fraction

from django.conf import settings
from django.db import models

from changes.impact import Assessment, verdict_label
from cluster.scope import ScopedManager, cluster_key
from portal.vocabulary.quantity import QuantityError, format_quantity, parse_quantity


class MigChangeRequest(models.Model):
    """A request to re-slice GPU nodes, with its impact assessment, decision and execution."""

    class State(models.TextChoices):
        PENDING = "pending", "Pending approval"
        APPROVED = "approved", "Approved"
        REJECTED = "rejected", "Rejected"
        CANCELLED = "cancelled", "Cancelled"
        SCHEDULED = "scheduled", "Scheduled"
        RUNNING = "running", "Running"
        SUCCEEDED = "succeeded", "Succeeded"
        FAILED = "failed", "Failed"
        ROLLING_BACK = "rolling_back", "Rolling back"
        ROLLED_BACK = "rolled_back", "Rolled back"

    class Kind(models.TextChoices):
        MIG = "mig", "MIG change"
        DRAIN = "drain", "Cordon and drain"

    cluster = cluster_key(related_name="mig_changes")
    kind = models.CharField(max_length=8, choices=Kind.choices, default=Kind.MIG)
    team = models.ForeignKey(
        "tenants.Team",
        on_delete=models.PROTECT,
        related_name="mig_changes",
        null=True,
        blank=True,
        help_text="The asking team; empty for a drain the portal suggested.",
    )
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.PROTECT,
        related_name="mig_changes_requested",
        null=True,
        blank=True,
        help_text="Empty when the portal suggested it (a GPU health finding).",
    )
    nodes = models.JSONField(default=list, help_text="Node names the change applies to.")
    pool = models.ForeignKey("fleet.NodePool", null=True, blank=True, on_delete=models.SET_NULL)
    pool_name = models.CharField(
        max_length=63, blank=True, help_text="The pool's name, kept when the pool is deleted."
    )
    target_config = models.CharField(max_length=63, blank=True)
    suggestion_key = models.CharField(
        max_length=200,
        blank=True,
        db_index=True,
        help_text="What made the portal suggest it (node, GPU, UUID, Xid): never suggested twice.",
    )
    reason = models.TextField()
    window_start = models.DateTimeField(null=True, blank=True)
    state = models.CharField(max_length=16, choices=State.choices, default=State.PENDING)
    assessment = models.JSONField(default=dict)
    verdict = models.CharField(max_length=16, blank=True)
    previous_configs = models.JSONField(default=dict, help_text="Node -> MIG config before.")
    queue_changes = models.JSONField(
        default=list, help_text="ClusterQueue nominal quota changes applied after verification."
    )
    queues_moved = models.JSONField(
        default=list,
        blank=True,
        help_text="The nominal quota changes it made (from, to): what a rollback moves back.",
    )
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="mig_changes_decided",
    )
    decision_comment = models.TextField(blank=True)
    decided_at = models.DateTimeField(null=True, blank=True)
    failure = models.TextField(blank=True)
    abort_requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="+",
        help_text="An admin asked a running change to stop at its next step boundary.",
    )
    abort_requested_at = models.DateTimeField(null=True, blank=True)
    teams_hit = models.ManyToManyField(
        "tenants.Team",
        blank=True,
        related_name="changes_hitting",
        help_text="Teams whose pods it evicts or whose quotas lose backing: they read the "
        "request and are told.",
    )
    wake_token = models.CharField(
        max_length=32,
        blank=True,
        help_text="The one scheduled continuation of a waiting execution (others exit).",
    )
    wake_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = ScopedManager["MigChangeRequest"]()

    class Meta:
        db_table = "fleet_migchangerequest"
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["cluster", "state", "created_at"], name="mig_change_state")]

    def __str__(self) -> str:
        if self.kind == self.Kind.DRAIN:
            return f"Drain #{self.pk}: {', '.join(self.nodes)}"
        return f"MIG change #{self.pk}: {', '.join(self.nodes)} -> {self.target_config}"

    @property
    def pool_label(self) -> str:
        """The node pool's name, also once the pool is deleted ("" without a pool)."""
        return self.pool.name if self.pool else self.pool_name

    @property
    def verdict_label(self) -> str:
        return verdict_label(self.verdict)

    @property
    def impact(self) -> Assessment:
        """The stored assessment, typed (a row of any stored version reads)."""
        return Assessment.from_json(self.assessment)

    @property
    def is_drain(self) -> bool:
        return self.kind == self.Kind.DRAIN

    @property
    def is_open(self) -> bool:
        return self.state in OPEN_STATES

    @property
    def is_terminal(self) -> bool:
        return self.state in TERMINAL_STATES


OPEN_STATES = {"pending", "approved", "scheduled", "running", "rolling_back"}
TERMINAL_STATES = {"rejected", "cancelled", "succeeded", "failed", "rolled_back"}


class NodeClaim(models.Model):
    """A node held by one open MIG change, rollback or drain: the database refuses a second
    holder (one claim per node of a cluster), however many workers or approvers race."""

    cluster = cluster_key(related_name="+")
    node = models.CharField(max_length=253)
    request = models.ForeignKey(MigChangeRequest, on_delete=models.CASCADE, related_name="claims")
    claimed_at = models.DateTimeField(auto_now_add=True)

    objects = ScopedManager["NodeClaim"]()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["cluster", "node"], name="one_claim_per_node")
        ]

    def __str__(self) -> str:
        return f"{self.node} held by #{self.request_id}"


class MigChangeStep(models.Model):
    """One step of the execution on one node, recorded as it runs (resumable)."""

    class Status(models.TextChoices):
        RUNNING = "running"
        DONE = "done"
        FAILED = "failed"

    request = models.ForeignKey(MigChangeRequest, on_delete=models.CASCADE, related_name="steps")
    round = models.CharField(max_length=8, default="apply", help_text="apply or rollback")
    node = models.CharField(max_length=253, blank=True)
    step = models.CharField(max_length=16)
    status = models.CharField(max_length=8, choices=Status.choices, default=Status.RUNNING)
    message = models.TextField(blank=True)
    pods = models.JSONField(
        default=list, blank=True, help_text="namespace/name of the pods this step evicted."
    )
    started_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "fleet_migchangestep"
        ordering = ["started_at", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["request", "round", "node", "step"], name="one_step_record"
            )
        ]

    def __str__(self) -> str:
        return f"{self.node} {self.step}: {self.status}"


class AutoApprovalRule(models.Model):
    """A quota increase that needs no approver: small, time-limited, and backed by capacity."""

    name = models.CharField(max_length=100, unique=True)
    kind = models.CharField(
        max_length=16,
        choices=[("namespace", "Namespace quota"), ("queue", "ClusterQueue nominal quota")],
    )
    resource = models.CharField(
        max_length=253, help_text="e.g. requests.nvidia.com/gpu or nvidia.com/gpu"
    )
    max_increase = models.PositiveIntegerField(help_text="Largest increase the rule grants.")
    max_days = models.PositiveIntegerField(help_text="Grants must end within this many days.")
    requires_capacity = models.BooleanField(
        default=True, help_text="Only when the fleet can back it."
    )
    active = models.BooleanField(default=True)

    class Meta:
        db_table = "tenants_autoapprovalrule"
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class QuotaChangeRequest(models.Model):
    """A team lead's request for more (or less) quota, decided like a MIG change."""

    class Kind(models.TextChoices):
        NAMESPACE = "namespace", "Namespace quota"
        QUEUE = "queue", "ClusterQueue nominal quota"

    class State(models.TextChoices):
        PENDING = "pending", "Pending approval"
        APPROVED = "approved", "Approved and applied"
        REJECTED = "rejected", "Rejected"
        CANCELLED = "cancelled", "Cancelled"
        EXPIRED = "expired", "Expired (reverted)"

    cluster = cluster_key(related_name="quota_requests")
    team = models.ForeignKey(
        "tenants.Team", on_delete=models.PROTECT, related_name="quota_requests"
    )
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+"
    )
    kind = models.CharField(max_length=16, choices=Kind.choices)
    namespace = models.ForeignKey(
        "tenants.Namespace", null=True, blank=True, on_delete=models.SET_NULL
    )
    namespace_name = models.CharField(
        max_length=63, blank=True, help_text="The namespace's name, kept when it is deleted."
    )
    cluster_queue = models.ForeignKey(
        "queues.ClusterQueue", null=True, blank=True, on_delete=models.SET_NULL
    )
    cluster_queue_name = models.CharField(
        max_length=253, blank=True, help_text="The ClusterQueue's name, kept when it is deleted."
    )
    flavor = models.CharField(max_length=253, blank=True)
    resource = models.CharField(max_length=253)
    previous = models.CharField(max_length=64, blank=True)
    requested = models.CharField(max_length=64)
    reason = models.TextField()
    grant_until = models.DateTimeField(null=True, blank=True, help_text="Empty: permanent.")
    state = models.CharField(max_length=16, choices=State.choices, default=State.PENDING)
    assessment = models.JSONField(default=dict)
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    auto_rule = models.ForeignKey(
        AutoApprovalRule, null=True, blank=True, on_delete=models.SET_NULL
    )
    auto_rule_name = models.CharField(
        max_length=100, blank=True, help_text="The rule's name, kept when the rule is deleted."
    )
    override_reason = models.TextField(
        blank=True,
        help_text="Why a platform admin asked for more than the fleet could ever back.",
    )
    decision_comment = models.TextField(blank=True)
    decided_at = models.DateTimeField(null=True, blank=True)
    warned_at = models.DateTimeField(null=True, blank=True)
    reverted_at = models.DateTimeField(null=True, blank=True)
    end_note = models.TextField(
        blank=True, help_text="What the end of the grant did to the quota, in words."
    )
    end_held = models.BooleanField(
        default=False,
        help_text="The grant's end could not take back its own change: a person decides.",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    objects = ScopedManager["QuotaChangeRequest"]()

    class Meta:
        db_table = "tenants_quotachangerequest"
        ordering = ["-created_at"]
        # One open request per quota item: a second is refused while the first waits (the
        # requester cancels it to ask for another value), so two approvals can never act
        # on the same old value.
        constraints = [
            models.UniqueConstraint(
                fields=["namespace", "resource"],
                condition=models.Q(state="pending", kind="namespace"),
                name="one_pending_namespace_quota_request",
            ),
            models.UniqueConstraint(
                fields=["cluster_queue", "flavor", "resource"],
                condition=models.Q(state="pending", kind="queue"),
                name="one_pending_queue_quota_request",
            ),
        ]

    def __str__(self) -> str:
        change = f"{self.previous or '-'} -> {self.requested}"
        return f"Quota request #{self.pk}: {self.where} {self.resource} {change}"

    @property
    def namespace_label(self) -> str:
        """The namespace's name, also once it is deleted ("" for a queue request)."""
        return self.namespace.name if self.namespace else self.namespace_name

    @property
    def cluster_queue_label(self) -> str:
        """The ClusterQueue's name, also once it is deleted ("" for a namespace request)."""
        return self.cluster_queue.name if self.cluster_queue else self.cluster_queue_name

    @property
    def target_name(self) -> str:
        """The name of the namespace or ClusterQueue it is about, also once that is gone."""
        if self.kind == self.Kind.NAMESPACE:
            return self.namespace_label
        return self.cluster_queue_label

    @property
    def target_deleted(self) -> bool:
        """Its namespace or ClusterQueue was deleted: it can no longer be applied."""
        if self.kind == self.Kind.NAMESPACE:
            return self.namespace_id is None
        return self.cluster_queue_id is None

    @property
    def where(self) -> str:
        """What it is about as pages and messages say it (``team-a-dev (deleted)``)."""
        name = (self.target_name or "?") + (" (deleted)" if self.target_deleted else "")
        return name if self.kind == self.Kind.NAMESPACE else f"{name} / {self.flavor}"

    @property
    def unset_means(self) -> str:
        """What no value means for its quota item: a namespace without it has no limit, a
        ClusterQueue without the nominal quota has 0 of its own (it may only borrow)."""
        return "no limit" if self.kind == self.Kind.NAMESPACE else "0"

    def value_text(self, value: str) -> str:
        """A value of its quota item as messages say it ("" in words)."""
        return value or self.unset_means

    @property
    def granted_delta(self) -> str:
        """The grant's own change (``+8``, ``-2``): what its end takes back."""
        delta = self.delta
        return ("+" if delta >= 0 else "-") + format_quantity(abs(delta))

    @property
    def end_phrase(self) -> str:
        """What the grant's end does, in words ("its +8 is taken back")."""
        if self.delta < 0:
            return f"the {format_quantity(-self.delta)} it cut is given back"
        return f"its {self.granted_delta} is taken back"

    @property
    def delta(self) -> Fraction:
        """The change its approval made (the value it replaced is ``previous``: an approval
        applies only while the quota still is that value)."""
        return _amount(self.requested) - _amount(self.previous)

    @property
    def rule_name(self) -> str:
        """The auto-approval rule that granted it, also once the rule is deleted."""
        return self.auto_rule.name if self.auto_rule else self.auto_rule_name


def _amount(text: str) -> Fraction:
    """A stored quota value as a number (none is 0)."""
    try:
        return parse_quantity(text) if text else Fraction(0)
    except QuantityError:
        return Fraction(0)


class MigPolicyChange(models.Model):
    """A platform admin's proposal of a cluster's whole MIG policy (governed or not, and
    each namespace's grants), with the impact assessment it was decided on: the claims the
    new policy would no longer allow and the pods waiting that it could let start. An
    approver (never the proposer) approves it on a fresh assessment; approval writes the
    policy (``tenants.services.set_mig_policy``), which the loop applies."""

    class State(models.TextChoices):
        PENDING = "pending", "Pending approval"
        APPROVED = "approved", "Approved and applied"
        REJECTED = "rejected", "Rejected"

    cluster = cluster_key(related_name="mig_policy_changes")
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    governed = models.BooleanField()
    grants = models.JSONField(
        default=list, help_text="The proposed grants: namespace, profile, devices."
    )
    previous = models.JSONField(
        default=dict, help_text="The policy when it was proposed: governed, grants."
    )
    reason = models.TextField()
    state = models.CharField(max_length=16, choices=State.choices, default=State.PENDING)
    assessment = models.JSONField(default=dict)
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    decided_at = models.DateTimeField(null=True, blank=True)
    decision_comment = models.TextField(blank=True)

    objects = ScopedManager["MigPolicyChange"]()

    class Meta:
        ordering = ["-created_at", "-pk"]
        constraints = [
            models.UniqueConstraint(
                fields=["cluster"],
                condition=models.Q(state="pending"),
                name="one_pending_mig_policy_change_per_cluster",
                violation_error_message="A change of this cluster's MIG policy is already "
                "waiting for a decision.",
            )
        ]

    def __str__(self) -> str:
        return f"MIG policy change #{self.pk} on {self.cluster_id}"
