"""The GPU fleet as the portal intends it: node pools (which nodes, which MIG layout) and the
custom MIG configs an admin defines per GPU model. What the cluster shows of the nodes is
observed by the loop (``cluster.models``)."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models

from cluster.scope import ScopedManager, cluster_key, unique_per_cluster
from gpus.catalog import gpu_models, placement_errors, standard_configs
from portal.vocabulary.names import label_value_errors
from portal.vocabulary.validators import validate_dns1123_label


class NodePool(models.Model):
    """A group of GPU nodes selected by labels, with the MIG layout they should have."""

    class Purpose(models.TextChoices):
        TRAIN = "train", "Training"
        INFER = "infer", "Inference"
        DEV = "dev", "Development"

    cluster = cluster_key(related_name="node_pools")
    name = models.CharField(max_length=63, validators=[validate_dns1123_label])
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
    # When an allocated GPU or MIG instance of the pool counts as idle (``idle/``): its
    # utilisation stayed under the threshold for the whole period, read without a gap.
    idle_threshold_percent = models.PositiveSmallIntegerField(
        default=5,
        validators=[MinValueValidator(1), MaxValueValidator(100)],
        help_text="Utilisation (%) under which an allocated GPU or MIG instance is idle.",
    )
    idle_period_minutes = models.PositiveIntegerField(
        default=120,
        validators=[MinValueValidator(5), MaxValueValidator(7 * 24 * 60)],
        help_text="How long it must stay under the threshold, read without a gap, to be idle.",
    )

    objects = ScopedManager["NodePool"]()

    class Meta:
        ordering = ["name", "cluster"]
        constraints = [
            unique_per_cluster("node_pool_once_per_cluster", "node pool"),
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def selector(self) -> dict[str, str]:
        """The labels that pick the pool's nodes (which of them it holds: ``fleet.membership``)."""
        return dict(self.node_selector or {})


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
