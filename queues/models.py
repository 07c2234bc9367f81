"""Queues: Kueue ResourceFlavors, Cohorts, ClusterQueues and LocalQueues (desired state).

The same models render Volcano ``Queue`` objects when the queue backend is Volcano.
``resource_groups`` keeps Kueue's own shape (``coveredResources`` / ``flavors`` /
``resources`` with ``nominalQuota``, ``borrowingLimit``, ``lendingLimit``), quantities as
strings, so what an admin reads is what Kueue reads.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from django.db import models

from cluster.scope import ScopedManager, cluster_key, unique_per_cluster
from queues import rules
from queues.dra import kueue_dra
from tenants.models import Namespace, validate_dns1123_label, validate_dns1123_subdomain


def _raise(issues: list[rules.Issue]) -> None:
    if not issues:
        return
    by_field: dict[str, list[str]] = {}
    for issue in issues:
        by_field.setdefault(issue.field, []).append(str(issue))
    raise ValidationError(by_field)


class StopPolicy(models.TextChoices):
    NONE = "None", "None (admitting)"
    HOLD = "Hold", "Hold (admit nothing new)"
    HOLD_AND_DRAIN = "HoldAndDrain", "Hold and drain (also evict admitted)"


class ResourceFlavor(models.Model):
    """A kind of node capacity (a GPU model, or a model in one MIG layout)."""

    cluster = cluster_key(related_name="flavors")
    name = models.CharField(max_length=253, validators=[validate_dns1123_subdomain])
    node_labels = models.JSONField(default=dict, blank=True)
    node_taints = models.JSONField(default=list, blank=True)
    tolerations = models.JSONField(default=list, blank=True)
    topology_name = models.CharField(
        max_length=253, blank=True, validators=[validate_dns1123_subdomain]
    )
    description = models.TextField(blank=True)

    objects = ScopedManager["ResourceFlavor"]()

    class Meta:
        ordering = ["name", "cluster"]
        constraints = [
            unique_per_cluster("flavor_once_per_cluster", "ResourceFlavor"),
        ]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        issues = [
            *rules.check_node_labels(self.node_labels),
            *rules.check_taints(self.node_taints),
            *rules.check_tolerations(self.tolerations),
        ]
        if self.topology_name and not self.node_labels:
            issues.append(
                rules.Issue(
                    "topology_name", "", "a topology-aware flavor needs at least one node label"
                )
            )
        _raise(issues)


class Cohort(models.Model):
    """A group of ClusterQueues that borrow from and lend to each other (may nest)."""

    cluster = cluster_key(related_name="cohorts")
    name = models.CharField(max_length=253, validators=[validate_dns1123_subdomain])
    parent = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.PROTECT, related_name="children"
    )
    fair_sharing_weight = models.CharField(max_length=32, blank=True)
    resource_groups = models.JSONField(
        default=list, blank=True, help_text="Extra quota shared by the cohort's members."
    )
    description = models.TextField(blank=True)

    objects = ScopedManager["Cohort"]()

    class Meta:
        ordering = ["name", "cluster"]
        constraints = [
            unique_per_cluster("cohort_once_per_cluster", "Cohort"),
        ]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        issues = [
            *rules.check_weight(self.fair_sharing_weight),
            *rules.check_resource_groups(
                self.resource_groups,
                owner="Cohort",
                has_parent=self.parent_id is not None,
                known_flavors=ResourceFlavor.objects.on(self.cluster_id).values_list(
                    "name", flat=True
                ),
            ),
        ]
        if self.pk is not None and self.parent_id is not None:
            ancestor, seen = self.parent, {self.pk}
            while ancestor is not None:
                if ancestor.pk in seen:
                    issues.append(
                        rules.Issue(
                            "parent",
                            "",
                            "would make a cycle: a cycle deactivates every queue in it",
                        )
                    )
                    break
                seen.add(ancestor.pk)
                ancestor = ancestor.parent
        _raise(issues)
        rules.quantities_as_text(self.resource_groups)


class ClusterQueue(models.Model):
    """A pool of quota that LocalQueues in team namespaces submit to."""

    class QueueingStrategy(models.TextChoices):
        BEST_EFFORT_FIFO = "BestEffortFIFO", "BestEffortFIFO (skip what does not fit)"
        STRICT_FIFO = "StrictFIFO", "StrictFIFO (oldest first, may block)"

    class WithinClusterQueue(models.TextChoices):
        NEVER = "Never"
        LOWER_PRIORITY = "LowerPriority"
        LOWER_OR_NEWER_EQUAL = "LowerOrNewerEqualPriority"

    class ReclaimWithinCohort(models.TextChoices):
        NEVER = "Never"
        LOWER_PRIORITY = "LowerPriority"
        ANY = "Any"

    class BorrowWithinCohort(models.TextChoices):
        NEVER = "Never"
        LOWER_PRIORITY = "LowerPriority"

    class Fungibility(models.TextChoices):
        MAY_STOP_SEARCH = "MayStopSearch"
        TRY_NEXT_FLAVOR = "TryNextFlavor"

    class FungibilityPreference(models.TextChoices):
        NONE = "", "(none)"
        BORROWING = "BorrowingOverPreemption"
        PREEMPTION = "PreemptionOverBorrowing"

    cluster = cluster_key(related_name="cluster_queues")
    name = models.CharField(max_length=253, validators=[validate_dns1123_subdomain])
    cohort = models.ForeignKey(
        Cohort, null=True, blank=True, on_delete=models.PROTECT, related_name="cluster_queues"
    )
    fair_sharing_weight = models.CharField(
        max_length=32, blank=True, help_text="Share under fair sharing; empty means Kueue's 1."
    )
    queueing_strategy = models.CharField(
        max_length=16, choices=QueueingStrategy.choices, default=QueueingStrategy.BEST_EFFORT_FIFO
    )
    namespace_selector = models.JSONField(
        null=True,
        blank=True,
        help_text=(
            "Empty: the namespaces that have a LocalQueue on this queue. {} admits every namespace."
        ),
    )
    preemption_within_cluster_queue = models.CharField(
        max_length=32, choices=WithinClusterQueue.choices, default=WithinClusterQueue.NEVER
    )
    preemption_reclaim_within_cohort = models.CharField(
        max_length=32, choices=ReclaimWithinCohort.choices, default=ReclaimWithinCohort.NEVER
    )
    preemption_borrow_within_cohort = models.CharField(
        max_length=32, choices=BorrowWithinCohort.choices, default=BorrowWithinCohort.NEVER
    )
    borrow_max_priority_threshold = models.IntegerField(null=True, blank=True)
    when_can_borrow = models.CharField(
        max_length=16, choices=Fungibility.choices, default=Fungibility.MAY_STOP_SEARCH
    )
    when_can_preempt = models.CharField(
        max_length=16, choices=Fungibility.choices, default=Fungibility.TRY_NEXT_FLAVOR
    )
    flavor_fungibility_preference = models.CharField(
        max_length=32, choices=FungibilityPreference.choices, blank=True, default=""
    )
    stop_policy = models.CharField(
        max_length=16, choices=StopPolicy.choices, default=StopPolicy.NONE
    )
    resource_groups = models.JSONField(default=list, blank=True)
    description = models.TextField(blank=True)

    objects = ScopedManager["ClusterQueue"]()

    class Meta:
        ordering = ["name", "cluster"]
        constraints = [
            unique_per_cluster("cluster_queue_once_per_cluster", "ClusterQueue"),
        ]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        issues = [
            *rules.check_weight(self.fair_sharing_weight),
            *rules.check_label_selector(self.namespace_selector),
            *rules.check_preemption(
                within_cluster_queue=self.preemption_within_cluster_queue,
                reclaim_within_cohort=self.preemption_reclaim_within_cohort,
                borrow_within_cohort=self.preemption_borrow_within_cohort,
            ),
            *rules.check_fungibility(
                when_can_borrow=self.when_can_borrow,
                when_can_preempt=self.when_can_preempt,
                preference=self.flavor_fungibility_preference,
            ),
            *rules.check_resource_groups(
                self.resource_groups,
                owner="ClusterQueue",
                has_parent=self.cohort_id is not None,
                known_flavors=ResourceFlavor.objects.on(self.cluster_id).values_list(
                    "name", flat=True
                ),
                in_counter_units=lambda name: name in kueue_dra(self.cluster_id).counted,
            ),
        ]
        if (
            self.borrow_max_priority_threshold is not None
            and self.preemption_borrow_within_cohort == self.BorrowWithinCohort.NEVER
        ):
            issues.append(
                rules.Issue(
                    "borrow_max_priority_threshold",
                    "",
                    "only applies when borrowWithinCohort is LowerPriority",
                )
            )
        _raise(issues)
        rules.quantities_as_text(self.resource_groups)

    def quota(self) -> dict[tuple[str, str], Any]:
        """Nominal quota per (flavor, resource)."""
        return rules.group_totals(self.resource_groups)

    def nominal_quota(self, flavor: str, resource: str) -> str:
        """The nominal quota of ``resource`` on ``flavor`` as written, "" when it has none."""
        for _, name, quota in rules.quota_entries(self.resource_groups):
            if name == flavor and quota["name"] == resource:
                return str(quota["nominalQuota"])
        return ""

    def set_nominal_quota(self, flavor: str, resource: str, value: str) -> None:
        """Change one nominal quota in ``resource_groups`` (saved by the caller's service)."""
        for _, name, quota in rules.quota_entries(self.resource_groups):
            if name == flavor and quota["name"] == resource:
                quota["nominalQuota"] = value


class LocalQueue(models.Model):
    """A team's entry point in one of its namespaces, pointing at a ClusterQueue."""

    name = models.CharField(
        max_length=63,
        validators=[validate_dns1123_label],
        help_text="Jobs name it in the label kueue.x-k8s.io/queue-name, so at most 63 characters.",
    )
    namespace = models.ForeignKey(Namespace, on_delete=models.CASCADE, related_name="local_queues")
    cluster_queue = models.ForeignKey(
        ClusterQueue, on_delete=models.PROTECT, related_name="local_queues"
    )
    stop_policy = models.CharField(
        max_length=16, choices=StopPolicy.choices, default=StopPolicy.NONE
    )
    budget_hold = models.BooleanField(
        default=False,
        help_text="Held because its team's budget is spent and enforced (written by the "
        "budget's enforcement only): rendered as stopPolicy Hold unless stop_policy says more.",
    )
    description = models.TextField(blank=True)

    class Meta:
        ordering = ["namespace", "name"]
        constraints = [
            models.UniqueConstraint(
                fields=["namespace", "name"],
                name="one_local_queue_name_per_namespace",
                violation_error_message="This namespace already has a LocalQueue with this name.",
            )
        ]

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def effective_stop_policy(self) -> str:
        """The stopPolicy the cluster is sent: the one set on the queue, else Hold while its
        team's budget holds it (Kueue's Hold: nothing new admitted, running work goes on)."""
        if self.stop_policy == StopPolicy.NONE and self.budget_hold:
            return str(StopPolicy.HOLD)
        return str(self.stop_policy)

    def clean(self) -> None:
        """A LocalQueue points at a ClusterQueue of its namespace's cluster."""
        if not (self.namespace_id and self.cluster_queue_id):
            return
        if self.namespace.cluster_id != self.cluster_queue.cluster_id:
            raise ValidationError(
                {
                    "cluster_queue": f"ClusterQueue {self.cluster_queue.name} is on another "
                    f"cluster than namespace {self.namespace.name}: choose one of its cluster."
                }
            )
