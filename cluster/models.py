"""What the loop records: what the applier sent and what the cluster answered, what each
poll saw (nodes, pods, Kueue workloads, Volcano PodGroups, refused pod creations, the portal's
own objects, Dynamic Resource Allocation's classes, slices and claims) and where the cluster
differs from the portal's intent (drift).

The poller writes only these tables; desired state lives in the apps that own it. The tables
keep the names they had before the loop had an app of its own (``db_table``), so an upgrade
moves no data and a web or worker process of the previous release keeps reading them while
the new one rolls out.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from django.contrib.postgres.indexes import GinIndex
from django.core.exceptions import ValidationError
from django.db import models

from cluster.decode import gpu_offer
from cluster.discovery import Discovered
from cluster.fields import ObservedJSONField
from cluster.scope import ScopedManager, cluster_key
from portal.vocabulary.validators import validate_dns1123_label


def explained_field() -> ObservedJSONField:  # type: ignore[type-arg]
    """Why a row waits and when it could start, as the poll that wrote it explained it (one
    definition for the three observed tables that wait: pods, workloads, refused creations)."""
    return ObservedJSONField(
        null=True,
        blank=True,
        help_text="Why it waits and when it could start, as the poll that wrote it explained "
        "it (diagnostics, through loop.written): the pages and the API show it, redacted per "
        "viewer. Null: nothing in its way, or not explained yet.",
    )


def explained_digest_field() -> models.BigIntegerField:  # type: ignore[type-arg]
    """A digest of ``explained`` as the explainer wrote it: the next poll compares its
    explanations with these 8 bytes, not with the JSON read back (25,000 explanations of
    700 bytes at the scale scenario, most of a steady poll's reading of them)."""
    return models.BigIntegerField(
        null=True,
        blank=True,
        editable=False,
        help_text="A digest of explained, written with it by the explainer (null with it).",
    )


# The seed's section 8.1: three kinds of cluster, each with its own priorities.
PURPOSE_MEANING = {
    "training": "Training cluster: large multi-GPU jobs and gang scheduling; high utilisation "
    "and fair sharing between teams matter most, a job may wait in the queue.",
    "inference": "Inference cluster: long-running services with latency targets; capacity is "
    "kept ready (often sliced with MIG) and availability matters more than utilisation.",
    "general": "General platform: development, experiments and smaller jobs of many teams side "
    "by side; quotas and queues keep one team from crowding out the others.",
}


class Cluster(models.Model):
    """A Kubernetes cluster the portal serves: how it is reached (credentials encrypted,
    never shown back) and what the last poll discovered there.

    The connection is set by an admin; the discovered fields (version, Kueue's served API
    versions, Volcano, the GPU Operator, the MIG strategy) are written by the poll only.
    Objects of one cluster (namespaces, queues, observed rows, changes) will point here.
    """

    class Purpose(models.TextChoices):
        TRAINING = "training", "Training"
        INFERENCE = "inference", "Inference"
        GENERAL = "general", "General platform"

    class Connection(models.TextChoices):
        SETTINGS = "settings", "The portal's settings (KUBE_URL, KUBECONFIG or KUBE_IN_CLUSTER)"
        IN_CLUSTER = "in_cluster", "In-cluster service account"
        KUBECONFIG = "kubeconfig", "A kubeconfig context"
        TOKEN = "token", "API URL and a bearer token"

    name = models.CharField(
        max_length=63,
        unique=True,
        validators=[validate_dns1123_label],
        help_text="A DNS label; it names the cluster in URLs, the API and the audit log.",
    )
    display_name = models.CharField(max_length=100)
    purpose = models.CharField(max_length=16, choices=Purpose.choices, default=Purpose.GENERAL)
    connection = models.CharField(max_length=16, choices=Connection.choices)
    api_url = models.CharField(
        max_length=300, blank=True, help_text="The API server's https URL (token connection)."
    )
    kubeconfig_context = models.CharField(
        max_length=253,
        blank=True,
        help_text="The context to use (kubeconfig connection; empty: its current context).",
    )
    verify_tls = models.BooleanField(default=True)
    ca_certificate = models.TextField(
        blank=True, help_text="The API server's CA certificate (PEM); empty: the system's."
    )
    credential = models.TextField(
        blank=True,
        editable=False,
        help_text="Fernet-encrypted: the bearer token (token connection) or a kubeconfig "
        "(kubeconfig connection; empty: the KUBECONFIG file). Never shown back.",
    )
    credential_set_at = models.DateTimeField(null=True, blank=True, editable=False)
    # What the last poll discovered (never set by hand).
    kubernetes_version = models.CharField(max_length=64, blank=True, editable=False)
    kueue_versions = ObservedJSONField(
        default=list,
        blank=True,
        editable=False,
        help_text="The kueue.x-k8s.io versions the API server serves, preferred first.",
    )
    volcano = models.BooleanField(
        default=False, editable=False, help_text="Volcano's scheduling.volcano.sh CRDs served."
    )
    gpu_operator = models.BooleanField(default=False, editable=False)
    gpu_operator_detail = models.CharField(max_length=300, blank=True, editable=False)
    mig_strategy = models.CharField(max_length=16, blank=True, editable=False)
    discovered_at = models.DateTimeField(null=True, blank=True, editable=False)
    discovery_error = models.TextField(blank=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.UniqueConstraint(
                fields=["connection"],
                condition=models.Q(connection="settings"),
                name="one_cluster_from_settings",
            )
        ]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        errors: dict[str, str] = {}
        if self.connection == self.Connection.TOKEN:
            url = urlsplit(self.api_url)
            if url.scheme not in ("https", "http") or not url.hostname:
                errors["api_url"] = "Give the API server's URL, e.g. https://10.0.0.1:6443."
        elif self.api_url:
            errors["api_url"] = "Only a token connection takes an API URL."
        if self.kubeconfig_context and self.connection != self.Connection.KUBECONFIG:
            errors["kubeconfig_context"] = "Only a kubeconfig connection takes a context."
        if self.ca_certificate and "-----BEGIN CERTIFICATE-----" not in self.ca_certificate:
            errors["ca_certificate"] = (
                "Paste the CA certificate in PEM (-----BEGIN CERTIFICATE-----)."
            )
        if errors:
            raise ValidationError(errors)

    @property
    def purpose_meaning(self) -> str:
        return PURPOSE_MEANING.get(self.purpose, "")

    @property
    def has_credential(self) -> bool:
        return bool(self.credential)

    def discovered_facts(self) -> Discovered | None:
        """The last discovery as the pure module's facts (None before the first one)."""
        if self.discovered_at is None:
            return None
        return Discovered(
            kubernetes_version=self.kubernetes_version,
            kueue_versions=tuple(self.kueue_versions),
            volcano=self.volcano,
            gpu_operator=self.gpu_operator,
            gpu_operator_detail=self.gpu_operator_detail,
            mig_strategy=self.mig_strategy,
        )


class AppliedObject(models.Model):
    """The last apply of one desired object: what was sent (hash) and how it went."""

    class Outcome(models.TextChoices):
        PENDING = "pending", "Pending"
        APPLIED = "applied", "Applied"
        CONFLICT = "conflict", "Conflict (owned by another manager)"
        FAILED = "failed", "Failed (refused by the cluster)"
        RETRYING = "retrying", "Retrying (cluster unreachable)"

    cluster = cluster_key(related_name="applied_objects")
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
    warnings = ObservedJSONField(
        default=list,
        blank=True,
        help_text="The API server's Warning headers on the last apply (a deprecated API "
        "version, an unknown field).",
    )
    adopted = models.BooleanField(
        default=False,
        help_text="It existed before the portal applied it: on removal the portal only gives "
        "up its fields and never deletes it.",
    )

    objects = ScopedManager["AppliedObject"]()

    class Meta:
        db_table = "sync_appliedobject"
        ordering = ["kind", "namespace", "name"]
        constraints = [
            models.UniqueConstraint(
                fields=["cluster", "kind", "namespace", "name"], name="applied_object_once"
            )
        ]

    def __str__(self) -> str:
        where = f"{self.namespace}/" if self.namespace else ""
        return f"{self.kind} {where}{self.name}"


class ObservedObject(models.Model):
    """A portal-managed object as the last poll saw it (spec and status), and the few the
    poll keeps beside them to read: Kueue's ConfigMap, the ResourceClaimTemplates."""

    cluster = cluster_key(related_name="observed_objects")
    api_version = models.CharField(max_length=100)
    kind = models.CharField(max_length=63)
    namespace = models.CharField(max_length=63, blank=True)
    name = models.CharField(max_length=253)
    spec = ObservedJSONField(default=dict)
    status = ObservedJSONField(default=dict)
    resource_version = models.CharField(max_length=32, blank=True)
    changed_by = ObservedJSONField(
        default=list, help_text="Other writers from managedFields: manager, operation, time."
    )
    last_seen = models.DateTimeField()

    objects = ScopedManager["ObservedObject"]()

    class Meta:
        db_table = "sync_observedobject"
        ordering = ["kind", "namespace", "name"]
        constraints = [
            models.UniqueConstraint(
                fields=["cluster", "kind", "namespace", "name"], name="observed_object_once"
            )
        ]

    def __str__(self) -> str:
        where = f"{self.namespace}/" if self.namespace else ""
        return f"{self.kind} {where}{self.name}"


class SyncRun(models.Model):
    """One poll of the cluster."""

    cluster = cluster_key(related_name="sync_runs")
    started_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)
    duration_ms = models.PositiveIntegerField(null=True, blank=True)
    nodes = models.PositiveIntegerField(default=0)
    pods = models.PositiveIntegerField(default=0)
    changed = models.PositiveIntegerField(default=0)
    error = models.TextField(blank=True)

    objects = ScopedManager["SyncRun"]()

    class Meta:
        db_table = "sync_syncrun"
        ordering = ["-started_at"]
        indexes = [models.Index(fields=["cluster", "-started_at"], name="sync_run_latest")]

    def __str__(self) -> str:
        return f"sync at {self.started_at:%Y-%m-%d %H:%M:%S}"

    @property
    def ok(self) -> bool:
        return self.finished_at is not None and not self.error

    @property
    def running(self) -> bool:
        """Still under way: a poll commits its row when it starts (a hung one is told by
        ``status_of`` once a poll interval has passed)."""
        return self.finished_at is None and not self.error


class ObservedNode(models.Model):
    """A node as the last poll saw it (GPU facts pulled out of labels and status)."""

    cluster = cluster_key(related_name="observed_nodes")
    name = models.CharField(max_length=253)
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
    capacity = ObservedJSONField(default=dict)
    allocatable = ObservedJSONField(default=dict)
    allocated = ObservedJSONField(
        default=dict, help_text="GPU resources requested by pods on the node."
    )
    labels = ObservedJSONField(default=dict)
    taints = ObservedJSONField(default=list)
    unschedulable = models.BooleanField(default=False)
    ready = models.BooleanField(default=False)
    resource_version = models.CharField(max_length=32, blank=True)
    row_hash = models.CharField(max_length=32, blank=True)
    first_seen = models.DateTimeField()
    last_changed = models.DateTimeField()
    gone_since = models.DateTimeField(null=True, blank=True)

    objects = ScopedManager["ObservedNode"]()

    class Meta:
        db_table = "fleet_observednode"
        ordering = ["name"]
        constraints = [
            models.UniqueConstraint(fields=["cluster", "name"], name="observed_node_once")
        ]
        indexes = [
            models.Index(fields=["cluster", "pool_label", "name"], name="observed_node_pool"),
            # A pool's (or a flavor's) nodes by their labels: ``labels @> selector``.
            GinIndex(fields=["labels"], name="observed_node_labels", opclasses=["jsonb_path_ops"]),
            # What the Fleet page's summaries were summed from (overview.selectors.stamps_read):
            # counted and stamped from the index alone, not a scan of 5,000 wide rows.
            models.Index(
                fields=["cluster", "last_changed", "gone_since"], name="observed_node_stamp"
            ),
        ]

    def __str__(self) -> str:
        return self.name

    def gpu_offer(self) -> dict[str, int]:
        """The GPU resources the node offers, by name (0 is absent)."""
        return gpu_offer(self.allocatable)

    def gpu_resources(self) -> list[tuple[str, int, int]]:
        """(resource, allocatable, allocated) for GPU resources the node offers (0 is absent)."""
        return [
            (name, amount, int(self.allocated.get(name, 0)))
            for name, amount in sorted(self.gpu_offer().items())
        ]


class ObservedPod(models.Model):
    """A non-terminal pod that asks for GPU resources or DRA claims, or any Pending pod, as
    last polled."""

    cluster = cluster_key(related_name="observed_pods")
    namespace = models.CharField(max_length=63)
    name = models.CharField(max_length=253)
    uid = models.CharField(max_length=64, blank=True)
    node_name = models.CharField(max_length=253, blank=True)
    phase = models.CharField(max_length=16, blank=True)
    gpu_requests = ObservedJSONField(default=dict)
    limit_defaulted = ObservedJSONField(
        default=list,
        blank=True,
        help_text="GPU resources the namespace's LimitRange set on the pod (it did not ask).",
    )
    priority = models.IntegerField(default=0)
    queue_name = models.CharField(max_length=63, blank=True)
    group_name = models.CharField(
        max_length=253, blank=True, help_text="Its Volcano PodGroup (a gang), if any."
    )
    workload_name = models.CharField(
        max_length=253,
        blank=True,
        help_text="The Kueue Workload it runs for (annotation kueue.x-k8s.io/workload), if any.",
    )
    pending_reason = models.CharField(max_length=64, blank=True)
    pending_message = models.TextField(blank=True)
    created_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(
        null=True, blank=True, help_text="When the kubelet took it on (status.startTime)."
    )
    owner_kind = models.CharField(
        max_length=63, blank=True, help_text="Its controller's kind (Job, ReplicaSet), if any."
    )
    owner_name = models.CharField(max_length=253, blank=True)
    resource_claims = ObservedJSONField(
        default=list,
        blank=True,
        help_text="Its DRA claims (spec.resourceClaims): name, claim (the ResourceClaim it "
        "uses, named or made from its template; empty until made), template.",
    )
    row_hash = models.CharField(max_length=32, blank=True)
    decoded_from = models.CharField(
        max_length=160,
        blank=True,
        help_text="The pod's uid and resourceVersion this row was decoded from, after the "
        "decoder's fingerprint: a pod listed again at the same version is not decoded again.",
    )
    last_changed = models.DateTimeField()
    explained = explained_field()
    explained_digest = explained_digest_field()

    objects = ScopedManager["ObservedPod"]()

    class Meta:
        db_table = "fleet_observedpod"
        ordering = ["namespace", "name"]
        constraints = [
            models.UniqueConstraint(
                fields=["cluster", "namespace", "name"], name="observed_pod_once"
            )
        ]
        indexes = [models.Index(fields=["cluster", "node_name"], name="observed_pod_node")]

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"


class ObservedWorkload(models.Model):
    """A Kueue Workload as last polled: which queue, admitted or why it waits."""

    cluster = cluster_key(related_name="observed_workloads")
    namespace = models.CharField(max_length=63)
    name = models.CharField(max_length=253)
    queue_name = models.CharField(max_length=63, blank=True)
    cluster_queue = models.CharField(max_length=253, blank=True)
    admitted = models.BooleanField(default=False)
    finished = models.BooleanField(default=False)
    reason = models.CharField(max_length=64, blank=True)
    message = models.TextField(blank=True)
    requests = ObservedJSONField(default=dict)
    flavors = ObservedJSONField(
        default=dict, blank=True, help_text="The flavor Kueue assigned each resource (admitted)."
    )
    priority = models.IntegerField(default=0)
    created_at = models.DateTimeField(null=True, blank=True)
    admitted_at = models.DateTimeField(
        null=True, blank=True, help_text="The latest admission (after the last eviction)."
    )
    finished_at = models.DateTimeField(
        null=True, blank=True, help_text="When Kueue marked it Finished (its condition's time)."
    )
    queued_at = models.DateTimeField(
        null=True, blank=True, help_text="Since when it waits: its latest requeue, or its creation."
    )
    pods_ready = models.BooleanField(
        default=True, help_text="False when Kueue's PodsReady condition says its pods are not."
    )
    evictions = models.PositiveIntegerField(default=0, help_text="How often Kueue evicted it.")
    evicted_reason = models.CharField(
        max_length=64, blank=True, help_text="Why Kueue evicted it last (PodsReadyTimeout, ...)."
    )
    evicted_at = models.DateTimeField(
        null=True, blank=True, help_text="When Kueue evicted it, while it is still evicted."
    )
    requeue_at = models.DateTimeField(
        null=True, blank=True, help_text="When its back-off after an eviction ends."
    )
    position = models.IntegerField(
        null=True, blank=True, help_text="0-based place in its ClusterQueue (visibility API)."
    )
    position_in_local_queue = models.IntegerField(null=True, blank=True)
    conditions = ObservedJSONField(
        default=list,
        blank=True,
        help_text="Kueue's conditions (type, status, reason, message, lastTransitionTime): "
        "one per type, the latest transition of each, as the workload's story is told.",
    )
    last_changed = models.DateTimeField()
    decoded_from = models.CharField(
        max_length=160,
        blank=True,
        help_text="The decoder's fingerprint, the API version, the Workload's uid and "
        "resourceVersion this row was decoded from: listed again at the same version and "
        "place in line, it is not decoded again.",
    )
    explained = explained_field()
    explained_digest = explained_digest_field()

    objects = ScopedManager["ObservedWorkload"]()

    class Meta:
        db_table = "fleet_observedworkload"
        ordering = ["namespace", "name"]
        constraints = [
            models.UniqueConstraint(
                fields=["cluster", "namespace", "name"], name="observed_workload_once"
            )
        ]
        # The Workloads list, newest first: a page of 50 read along the index (its cluster
        # in it: the rows an offset skips are read from the index alone).
        indexes = [
            models.Index(
                models.F("created_at").desc(nulls_last=True),
                models.F("id").desc(),
                include=["cluster_id"],
                name="observed_workload_newest",
            ),
            # The workloads a ClusterQueue holds quota for and has not admitted yet (the
            # Queues page's lines, ``queues.observed.first_in_line``): few at any time, so
            # the index is small and the poll's writes seldom touch it.
            models.Index(
                fields=["cluster", "cluster_queue"],
                condition=models.Q(admitted=False, finished=False) & ~models.Q(cluster_queue=""),
                name="observed_workload_reserved",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"


class ObservedPodGroup(models.Model):
    """A Volcano PodGroup (a gang) as last polled: the portal reads them, never writes them."""

    cluster = cluster_key(related_name="observed_podgroups")
    namespace = models.CharField(max_length=63)
    name = models.CharField(max_length=253)
    queue = models.CharField(max_length=253, blank=True)
    min_member = models.PositiveIntegerField(default=0)
    min_resources = ObservedJSONField(default=dict)
    phase = models.CharField(max_length=16, blank=True)
    running = models.PositiveIntegerField(default=0)
    reason = models.CharField(max_length=64, blank=True)
    message = models.TextField(blank=True)
    last_changed = models.DateTimeField()

    objects = ScopedManager["ObservedPodGroup"]()

    class Meta:
        db_table = "fleet_observedpodgroup"
        ordering = ["namespace", "name"]
        constraints = [
            models.UniqueConstraint(
                fields=["cluster", "namespace", "name"], name="observed_podgroup_once"
            )
        ]

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name} ({self.phase})"


class ObservedCreateFailure(models.Model):
    """A controller that could not create pods (a FailedCreate event, e.g. exceeded quota)."""

    cluster = cluster_key(related_name="observed_create_failures")
    namespace = models.CharField(max_length=63)
    kind = models.CharField(max_length=63)
    name = models.CharField(max_length=253)
    queue_name = models.CharField(
        max_length=63, blank=True, help_text="The Kueue LocalQueue its label names (a Job's)."
    )
    message = models.TextField()
    count = models.PositiveIntegerField(default=1)
    last_seen = models.DateTimeField()
    explained = explained_field()
    explained_digest = explained_digest_field()

    objects = ScopedManager["ObservedCreateFailure"]()

    class Meta:
        db_table = "fleet_observedcreatefailure"
        ordering = ["namespace", "kind", "name"]
        constraints = [
            models.UniqueConstraint(
                fields=["cluster", "namespace", "kind", "name"], name="observed_create_failure_once"
            )
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}: {self.message[:60]}"


class ObservedEvent(models.Model):
    """An Event Kueue wrote about a Workload (QuotaReserved, Admitted, Pending, Preempted,
    EvictedDueTo...), kept past the API server's own hour (its ``--event-ttl``) while the
    workload is there: a workload's story on its page. A poll writes the new and changed
    ones (those of the last minutes: ``loop.fetch.EVENTS_LOOKED_BACK``); each workload
    keeps its newest ``loop.write.EVENTS_PER_WORKLOAD`` and the cluster its newest
    ``EVENTS_PER_CLUSTER``; a workload's go with it."""

    cluster = cluster_key(related_name="observed_events")
    namespace = models.CharField(max_length=63)
    name = models.CharField(max_length=253, help_text="The Event object's own name.")
    workload_name = models.CharField(max_length=253, help_text="The Workload it is about.")
    type = models.CharField(max_length=16, blank=True, help_text="Normal or Warning.")
    reason = models.CharField(max_length=128)
    message = models.TextField(blank=True)
    count = models.PositiveIntegerField(
        default=1, help_text="How often it happened (its series' count, or the old count)."
    )
    first_seen = models.DateTimeField()
    last_seen = models.DateTimeField()
    preemptor = models.CharField(
        max_length=320,
        blank=True,
        help_text="namespace/name of the workload its message names by UID (a preemptor), "
        "when the same poll saw it: shown only to those who may name it.",
    )

    objects = ScopedManager["ObservedEvent"]()

    class Meta:
        ordering = ["namespace", "workload_name", "last_seen"]
        constraints = [
            models.UniqueConstraint(
                fields=["cluster", "namespace", "name"], name="observed_event_once"
            )
        ]
        indexes = [
            models.Index(
                fields=["cluster", "namespace", "workload_name", "last_seen"],
                name="observed_event_of_workload",
            ),
            # The newest kept (where a poll looks back from) and the oldest past the bound.
            models.Index(fields=["cluster", "last_seen"], name="observed_event_newest"),
        ]

    def __str__(self) -> str:
        return f"{self.namespace}/{self.workload_name}: {self.reason}"


class Drift(models.Model):
    """Something the cluster shows differently from what the portal intends."""

    class Kind(models.TextChoices):
        MIG_LAYOUT = "mig_layout", "MIG layout"
        OBJECT = "object", "Managed object"
        MISSING = "missing", "Managed object missing"

    cluster = cluster_key(related_name="drifts")
    kind = models.CharField(max_length=16, choices=Kind.choices)
    subject = models.CharField(max_length=300, help_text="Node name, or Kind namespace/name.")
    field = models.CharField(max_length=200, blank=True)
    desired = models.TextField(blank=True)
    observed = models.TextField(blank=True)
    detail = models.TextField(blank=True)
    first_seen = models.DateTimeField()
    last_seen = models.DateTimeField()
    resolved_at = models.DateTimeField(null=True, blank=True)

    objects = ScopedManager["Drift"]()

    class Meta:
        db_table = "fleet_drift"
        ordering = ["-first_seen"]
        constraints = [
            models.UniqueConstraint(
                fields=["cluster", "kind", "subject", "field"],
                condition=models.Q(resolved_at__isnull=True),
                name="one_open_drift_per_field",
            )
        ]

    def __str__(self) -> str:
        return f"{self.subject} {self.field}: {self.observed!r} (wanted {self.desired!r})"


class ObservedDeviceClass(models.Model):
    """A DeviceClass (resource.k8s.io/v1) as last polled: a named selection of the devices
    DRA drivers publish (``gpu.nvidia.com``: whole NVIDIA GPUs)."""

    cluster = cluster_key(related_name="observed_device_classes")
    name = models.CharField(max_length=253)
    driver = models.CharField(
        max_length=253, blank=True, help_text="The driver its selectors name, if one does."
    )
    selectors = ObservedJSONField(default=list, help_text="Its CEL expressions.")
    extended_resource = models.CharField(
        max_length=253,
        blank=True,
        help_text="The extended resource name it answers for (spec.extendedResourceName).",
    )
    last_changed = models.DateTimeField()

    objects = ScopedManager["ObservedDeviceClass"]()

    class Meta:
        ordering = ["name"]
        constraints = [
            models.UniqueConstraint(fields=["cluster", "name"], name="observed_device_class_once")
        ]

    def __str__(self) -> str:
        return self.name


class ObservedResourceSlice(models.Model):
    """A ResourceSlice as last polled: the devices a DRA driver publishes for a node (or a
    pool of nodes), and the counters partitionable devices share (a MIG-capable GPU)."""

    cluster = cluster_key(related_name="observed_resource_slices")
    name = models.CharField(max_length=253)
    node_name = models.CharField(max_length=253, blank=True)
    driver = models.CharField(max_length=253)
    pool = models.CharField(max_length=253)
    pool_generation = models.PositiveBigIntegerField(default=0)
    slice_count = models.PositiveIntegerField(
        default=1, help_text="How many slices make up the pool (resourceSliceCount)."
    )
    devices = ObservedJSONField(
        default=list,
        help_text="Each device: name, attributes (name -> value), capacity (name -> quantity), "
        "consumesCounters (counterSet, counters), and a tainted device's taints (key, value, "
        "effect, timeAdded).",
    )
    shared_counters = ObservedJSONField(
        default=list, help_text="The counter sets it shares: name, counters (name -> quantity)."
    )
    row_hash = models.CharField(max_length=32, blank=True)
    decoded_from = models.CharField(
        max_length=160,
        blank=True,
        help_text="The decoder's fingerprint, the object's uid and resourceVersion this row was "
        "decoded from: listed again at the same version, it is not decoded again.",
    )
    last_changed = models.DateTimeField()

    objects = ScopedManager["ObservedResourceSlice"]()

    class Meta:
        ordering = ["node_name", "driver", "pool", "name"]
        constraints = [
            models.UniqueConstraint(fields=["cluster", "name"], name="observed_resource_slice_once")
        ]
        indexes = [
            models.Index(fields=["cluster", "node_name"], name="observed_slice_node"),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.driver}, pool {self.pool})"


class ObservedResourceClaim(models.Model):
    """A ResourceClaim as last polled: the devices it asks for, the ones the scheduler
    allocated (driver, pool, device) and the pods it is reserved for."""

    class State(models.TextChoices):
        PENDING = "pending", "Pending"
        ALLOCATED = "allocated", "Allocated"

    cluster = cluster_key(related_name="observed_resource_claims")
    namespace = models.CharField(max_length=63)
    name = models.CharField(max_length=253)
    state = models.CharField(max_length=16, choices=State.choices, default=State.PENDING)
    requests = ObservedJSONField(
        default=list,
        help_text="Each request: name, device_class, mode, count, selectors (or first_available: "
        "its alternatives, in order).",
    )
    allocated = ObservedJSONField(
        default=list, help_text="The allocated devices: request, driver, pool, device."
    )
    node_name = models.CharField(
        max_length=253, blank=True, help_text="The node its allocation is bound to, if one."
    )
    reserved_for = ObservedJSONField(
        default=list, help_text="Who may use it (status.reservedFor): resource, name."
    )
    owner_kind = models.CharField(max_length=63, blank=True)
    owner_name = models.CharField(max_length=253, blank=True)
    created_at = models.DateTimeField(null=True, blank=True)
    row_hash = models.CharField(max_length=32, blank=True)
    decoded_from = models.CharField(
        max_length=160,
        blank=True,
        help_text="The decoder's fingerprint, the object's uid and resourceVersion this row was "
        "decoded from: listed again at the same version, it is not decoded again.",
    )
    last_changed = models.DateTimeField()

    objects = ScopedManager["ObservedResourceClaim"]()

    class Meta:
        ordering = ["namespace", "name"]
        constraints = [
            models.UniqueConstraint(
                fields=["cluster", "namespace", "name"], name="observed_resource_claim_once"
            )
        ]

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name} ({self.state})"
