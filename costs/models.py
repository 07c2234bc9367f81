"""Prices of GPU time and how the price of idle capacity is shared.

A price holds from its effective day until the next price of the same GPU model, MIG
profile and DRA device class: history is priced at the price that held on each day
(``costs.pricing``). Prices are global (a GPU model costs the same on every cluster); the
pools' GPU models say which price a cluster's hours take.
"""

from __future__ import annotations

from decimal import Decimal

from django.core.validators import MinValueValidator
from django.db import models

from cluster.scope import ScopedManager, cluster_key


class Price(models.Model):
    """What one hour of a GPU model (``profile`` and ``device_class`` blank), of one MIG
    slice of it, or of one device of it allocated through a DRA device class costs, from
    ``effective_from`` on. A MIG profile without a price of its own costs its share of the
    whole GPU's price (the larger of its compute and memory fractions); a DRA device class
    without one costs what its device costs through the device plugin (a whole GPU its
    price, a MIG device its profile's)."""

    gpu_model = models.CharField(max_length=64, help_text="Catalog key, e.g. A100-80GB.")
    profile = models.CharField(
        max_length=32,
        blank=True,
        help_text="A MIG profile of the model, e.g. 3g.40gb; blank: the whole GPU.",
    )
    device_class = models.CharField(
        max_length=253,
        blank=True,
        help_text="A DRA DeviceClass, e.g. mig.nvidia.com: one device of the model allocated "
        "through it; blank: the device plugin's GPU or MIG profile.",
    )
    per_hour = models.DecimalField(
        max_digits=12,
        decimal_places=4,
        validators=[MinValueValidator(Decimal(0))],
        help_text="Price of one hour of it, in the portal's currency.",
    )
    effective_from = models.DateField(help_text="The first day (UTC) this price holds.")
    note = models.CharField(max_length=200, blank=True)

    class Meta:
        ordering = ["gpu_model", "profile", "device_class", "effective_from"]
        constraints = [
            models.UniqueConstraint(
                fields=["gpu_model", "profile", "device_class", "effective_from"],
                name="costs_price_once",
            )
        ]

    def __str__(self) -> str:
        what = " ".join(w for w in (self.gpu_model, self.profile, self.device_class) if w)
        return f"{what} from {self.effective_from}: {self.per_hour}/h"


class CostPolicy(models.Model):
    """The portal's one row of cost settings: the currency prices are in, and who pays for
    idle capacity (allocatable GPU-hours no pod was allocated)."""

    class IdleSharing(models.TextChoices):
        PLATFORM = "platform", "kept by the platform"
        QUOTA = "quota", "shared by quota"
        USE = "use", "shared by use"

    currency = models.CharField(max_length=3, default="USD", help_text="ISO 4217 code.")
    idle_sharing = models.CharField(
        max_length=8, choices=IdleSharing.choices, default=IdleSharing.PLATFORM
    )

    class Meta:
        verbose_name_plural = "cost policy"

    def __str__(self) -> str:
        return f"{self.currency}, idle capacity {self.get_idle_sharing_display()}"


class BusyDay(models.Model):
    """GPU time found busy per team namespace, GPU resource and UTC day, as the DCGM
    exporters read it: utilisation x the device's share of a GPU x the seconds each reading
    stands for (``busy_seconds``, GPU-seconds), and the device-seconds read
    (``read_seconds``). Hours no exporter read have no row: "not read", never a guess."""

    cluster = cluster_key(related_name="+")
    day = models.DateField()
    namespace = models.CharField(max_length=63)
    resource = models.CharField(max_length=128)
    busy_seconds = models.FloatField(default=0)
    read_seconds = models.FloatField(default=0)

    objects = ScopedManager["BusyDay"]()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["cluster", "day", "namespace", "resource"], name="costs_busy_once"
            )
        ]
        indexes = [models.Index(fields=["day"], name="costs_busy_day")]

    def __str__(self) -> str:
        return f"{self.day} {self.namespace} {self.resource}"


class BusyState(models.Model):
    """When utilisation was last recorded (one row): the next reading stands for the time
    since, up to QM_SAMPLE_MAX_GAP_SECONDS."""

    last_read = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"read {self.last_read}"
