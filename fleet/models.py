"""The GPU fleet: node pools (desired) and what the poller last saw of nodes and pods
(observed). The poller writes only the observed tables; admins write node pools."""

from __future__ import annotations

from django.db import models

from tenants.models import validate_dns1123_label


class NodePool(models.Model):
    """A group of GPU nodes selected by labels, with the MIG layout they should have."""

    class Purpose(models.TextChoices):
        TRAIN = "train", "Training"
        INFER = "infer", "Inference"
        DEV = "dev", "Development"

    name = models.CharField(max_length=63, unique=True, validators=[validate_dns1123_label])
    node_selector = models.JSONField(
        default=dict,
        help_text='Node labels that pick the pool, e.g. {"quartermaster.io/pool": "train"}.',
    )
    purpose = models.CharField(max_length=8, choices=Purpose.choices, default=Purpose.TRAIN)
    mig_config = models.CharField(
        max_length=63,
        blank=True,
        help_text="Intended nvidia.com/mig.config of every node in the pool.",
    )
    description = models.TextField(blank=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def selects(self, labels: dict[str, str]) -> bool:
        return bool(self.node_selector) and all(
            labels.get(key) == value for key, value in self.node_selector.items()
        )


class ObservedNode(models.Model):
    """A node as the last poll saw it (GPU facts pulled out of labels and status)."""

    name = models.CharField(max_length=253, unique=True)
    uid = models.CharField(max_length=64, blank=True)
    gpu_product = models.CharField(max_length=128, blank=True)
    gpu_count = models.PositiveIntegerField(default=0)
    gpu_memory_mib = models.PositiveIntegerField(default=0)
    mig_capable = models.BooleanField(default=False)
    mig_strategy = models.CharField(max_length=16, blank=True)
    mig_config = models.CharField(max_length=63, blank=True)
    mig_config_state = models.CharField(max_length=16, blank=True)
    mig_config_by = models.CharField(
        max_length=200,
        blank=True,
        help_text="Who last set nvidia.com/mig.config (managedFields): manager and time.",
    )
    pool_label = models.CharField(max_length=63, blank=True)
    capacity = models.JSONField(default=dict)
    allocatable = models.JSONField(default=dict)
    allocated = models.JSONField(
        default=dict, help_text="GPU resources requested by pods on the node."
    )
    labels = models.JSONField(default=dict)
    taints = models.JSONField(default=list)
    unschedulable = models.BooleanField(default=False)
    ready = models.BooleanField(default=False)
    resource_version = models.CharField(max_length=32, blank=True)
    row_hash = models.CharField(max_length=32, blank=True)
    first_seen = models.DateTimeField()
    last_changed = models.DateTimeField()
    gone_since = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["name"]
        indexes = [models.Index(fields=["pool_label", "name"], name="observed_node_pool")]

    def __str__(self) -> str:
        return self.name

    def gpu_resources(self) -> list[tuple[str, int, int]]:
        """(resource, allocatable, allocated) for GPU resources the node offers (0 is absent)."""
        out = []
        for name, value in sorted(self.allocatable.items()):
            if name.startswith("nvidia.com/") and int(value or 0) > 0:
                out.append((name, int(value), int(self.allocated.get(name, 0))))
        return out


class ObservedPod(models.Model):
    """A non-terminal pod that asks for GPU resources, or any Pending pod, as last polled."""

    namespace = models.CharField(max_length=63)
    name = models.CharField(max_length=253)
    uid = models.CharField(max_length=64, blank=True)
    node_name = models.CharField(max_length=253, blank=True)
    phase = models.CharField(max_length=16, blank=True)
    gpu_requests = models.JSONField(default=dict)
    priority = models.IntegerField(default=0)
    queue_name = models.CharField(max_length=63, blank=True)
    group_name = models.CharField(
        max_length=253, blank=True, help_text="Its Volcano PodGroup (a gang), if any."
    )
    pending_reason = models.CharField(max_length=64, blank=True)
    pending_message = models.TextField(blank=True)
    created_at = models.DateTimeField(null=True, blank=True)
    row_hash = models.CharField(max_length=32, blank=True)
    last_changed = models.DateTimeField()

    class Meta:
        ordering = ["namespace", "name"]
        constraints = [
            models.UniqueConstraint(fields=["namespace", "name"], name="observed_pod_once")
        ]
        indexes = [models.Index(fields=["node_name"], name="observed_pod_node")]

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"


class Drift(models.Model):
    """Something the cluster shows differently from what the portal intends."""

    class Kind(models.TextChoices):
        MIG_LAYOUT = "mig_layout", "MIG layout"
        OBJECT = "object", "Managed object"
        MISSING = "missing", "Managed object missing"

    kind = models.CharField(max_length=16, choices=Kind.choices)
    subject = models.CharField(max_length=300, help_text="Node name, or Kind namespace/name.")
    field = models.CharField(max_length=200, blank=True)
    desired = models.TextField(blank=True)
    observed = models.TextField(blank=True)
    detail = models.TextField(blank=True)
    first_seen = models.DateTimeField()
    last_seen = models.DateTimeField()
    resolved_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-first_seen"]
        constraints = [
            models.UniqueConstraint(
                fields=["kind", "subject", "field"],
                condition=models.Q(resolved_at__isnull=True),
                name="one_open_drift_per_field",
            )
        ]

    def __str__(self) -> str:
        return f"{self.subject} {self.field}: {self.observed!r} (wanted {self.desired!r})"


class ObservedWorkload(models.Model):
    """A Kueue Workload as last polled: which queue, admitted or why it waits."""

    namespace = models.CharField(max_length=63)
    name = models.CharField(max_length=253)
    queue_name = models.CharField(max_length=63, blank=True)
    cluster_queue = models.CharField(max_length=253, blank=True)
    admitted = models.BooleanField(default=False)
    finished = models.BooleanField(default=False)
    reason = models.CharField(max_length=64, blank=True)
    message = models.TextField(blank=True)
    requests = models.JSONField(default=dict)
    priority = models.IntegerField(default=0)
    created_at = models.DateTimeField(null=True, blank=True)
    admitted_at = models.DateTimeField(null=True, blank=True)
    position = models.IntegerField(
        null=True, blank=True, help_text="0-based place in its ClusterQueue (visibility API)."
    )
    position_in_local_queue = models.IntegerField(null=True, blank=True)
    last_changed = models.DateTimeField()

    class Meta:
        ordering = ["namespace", "name"]
        constraints = [
            models.UniqueConstraint(fields=["namespace", "name"], name="observed_workload_once")
        ]

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"


class MigConfig(models.Model):
    """A custom MIG layout an admin defines for one GPU model (the same on every GPU).

    The GPU Operator's standard configs (``all-3g.40gb``…) come from the catalog; custom
    ones must also be added to the MIG Manager's ConfigMap under the same name.
    """

    name = models.CharField(max_length=63, unique=True)
    gpu_model = models.CharField(max_length=64, help_text="Catalog key, e.g. A100-80GB.")
    devices = models.JSONField(
        default=dict, help_text='Per GPU, e.g. {"3g.40gb": 1, "2g.20gb": 2}.'
    )
    description = models.TextField(blank=True)

    class Meta:
        ordering = ["gpu_model", "name"]
        verbose_name = "custom MIG config"

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        from django.core.exceptions import ValidationError

        from fleet.catalog import gpu_models, placement_errors, standard_configs
        from portal.names import label_value_errors

        errors: dict[str, list[str]] = {}
        if label_value_errors(self.name):
            errors["name"] = ["A MIG config name is a label value: letters, digits, '-', '_', '.'."]
        elif self.name in standard_configs():
            errors["name"] = [
                f"{self.name} is a standard GPU Operator config; choose another name."
            ]
        if self.gpu_model not in gpu_models():
            errors["gpu_model"] = [f"Unknown GPU model; known: {', '.join(sorted(gpu_models()))}."]
        elif not isinstance(self.devices, dict) or not self.devices:
            errors["devices"] = ['Give the MIG devices per GPU, e.g. {"3g.40gb": 2}.']
        else:
            problems = placement_errors(
                self.gpu_model, {str(k): int(v) for k, v in self.devices.items()}
            )
            if problems:
                errors["devices"] = problems
        if errors:
            raise ValidationError(errors)


class MigChangeRequest(models.Model):
    """A request to re-slice GPU nodes, with its impact assessment, decision and execution."""

    class State(models.TextChoices):
        DRAFT = "draft", "Draft"
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
        "auth.User",
        on_delete=models.PROTECT,
        related_name="mig_changes_requested",
        null=True,
        blank=True,
        help_text="Empty when the portal suggested it (a GPU health finding).",
    )
    nodes = models.JSONField(default=list, help_text="Node names the change applies to.")
    pool = models.ForeignKey(NodePool, null=True, blank=True, on_delete=models.SET_NULL)
    target_config = models.CharField(max_length=63, blank=True)
    suggestion_key = models.CharField(
        max_length=200,
        blank=True,
        db_index=True,
        help_text="What made the portal suggest it (node, GPU, UUID, Xid): never suggested twice.",
    )
    reason = models.TextField()
    window_start = models.DateTimeField(null=True, blank=True)
    state = models.CharField(max_length=16, choices=State.choices, default=State.DRAFT)
    assessment = models.JSONField(default=dict)
    verdict = models.CharField(max_length=16, blank=True)
    previous_configs = models.JSONField(default=dict, help_text="Node -> MIG config before.")
    queue_changes = models.JSONField(
        default=list, help_text="ClusterQueue nominal quota changes applied after verification."
    )
    decided_by = models.ForeignKey(
        "auth.User",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="mig_changes_decided",
    )
    decision_comment = models.TextField(blank=True)
    decided_at = models.DateTimeField(null=True, blank=True)
    failure = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["state", "created_at"], name="mig_change_state")]

    def __str__(self) -> str:
        if self.kind == self.Kind.DRAIN:
            return f"Drain #{self.pk}: {', '.join(self.nodes)}"
        return f"MIG change #{self.pk}: {', '.join(self.nodes)} -> {self.target_config}"

    @property
    def is_drain(self) -> bool:
        return self.kind == self.Kind.DRAIN

    @property
    def is_open(self) -> bool:
        return self.state in OPEN_STATES

    @property
    def is_terminal(self) -> bool:
        return self.state in TERMINAL_STATES


OPEN_STATES = {"draft", "pending", "approved", "scheduled", "running", "rolling_back"}
TERMINAL_STATES = {"rejected", "cancelled", "succeeded", "failed", "rolled_back"}


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
    started_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["started_at", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["request", "round", "node", "step"], name="one_step_record"
            )
        ]

    def __str__(self) -> str:
        return f"{self.node} {self.step}: {self.status}"


class NodeHealth(models.Model):
    """What the node's DCGM exporter reported at the last collection: per GPU utilisation,
    memory, temperature, power, the last Xid, and per MIG instance utilisation and memory."""

    node = models.CharField(max_length=253, unique=True)
    observed_at = models.DateTimeField()
    error = models.TextField(blank=True, help_text="Why the exporter could not be read.")
    gpus = models.JSONField(default=list)
    findings = models.JSONField(default=list, help_text="What needs attention, worst first.")
    worst = models.CharField(
        max_length=8, default="ok", help_text="ok, info, warning or critical", db_index=True
    )

    class Meta:
        ordering = ["node"]

    def __str__(self) -> str:
        return f"{self.node}: {self.worst}"


class ObservedPodGroup(models.Model):
    """A Volcano PodGroup (a gang) as last polled: the portal reads them, never writes them."""

    namespace = models.CharField(max_length=63)
    name = models.CharField(max_length=253)
    queue = models.CharField(max_length=253, blank=True)
    min_member = models.PositiveIntegerField(default=0)
    min_resources = models.JSONField(default=dict)
    phase = models.CharField(max_length=16, blank=True)
    running = models.PositiveIntegerField(default=0)
    reason = models.CharField(max_length=64, blank=True)
    message = models.TextField(blank=True)
    last_changed = models.DateTimeField()

    class Meta:
        ordering = ["namespace", "name"]
        constraints = [
            models.UniqueConstraint(fields=["namespace", "name"], name="observed_podgroup_once")
        ]

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name} ({self.phase})"


class ObservedCreateFailure(models.Model):
    """A controller that could not create pods (a FailedCreate event, e.g. exceeded quota)."""

    namespace = models.CharField(max_length=63)
    kind = models.CharField(max_length=63)
    name = models.CharField(max_length=253)
    message = models.TextField()
    count = models.PositiveIntegerField(default=1)
    last_seen = models.DateTimeField()

    class Meta:
        ordering = ["namespace", "kind", "name"]
        constraints = [
            models.UniqueConstraint(
                fields=["namespace", "kind", "name"], name="observed_create_failure_once"
            )
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}: {self.message[:60]}"
