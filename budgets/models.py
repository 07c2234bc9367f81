"""Budgets: how much a team may use in a period (GPU-hours now; money once the portal has
prices), the warnings sent as its use crosses each threshold, and the extensions its lead
asks for and a platform admin grants. Whether the team's queues are held is not stored
here: it is the LocalQueues' desired state (``queues.LocalQueue.budget_hold``)."""

from __future__ import annotations

from decimal import Decimal

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MinValueValidator
from django.db import models

from costs.models import Price
from tenants.models import Team

DEFAULT_THRESHOLDS = (80, 100)
MOST_PERCENT = 1000


def default_thresholds() -> list[int]:
    return list(DEFAULT_THRESHOLDS)


class Budget(models.Model):
    """A team's budget: an amount per calendar month (UTC) or over one custom period, the
    percentages at which the team is warned, and whether a spent budget holds the team's
    LocalQueues (off unless a platform admin turns it on)."""

    class Unit(models.TextChoices):
        GPU_HOURS = "gpu_hours", "GPU-hours"
        MONEY = "money", "Money"

    class Period(models.TextChoices):
        MONTHLY = "monthly", "Every calendar month (UTC)"
        CUSTOM = "custom", "A custom period"

    team = models.OneToOneField(Team, on_delete=models.CASCADE, related_name="budget")
    unit = models.CharField(max_length=16, choices=Unit.choices, default=Unit.GPU_HOURS)
    amount = models.DecimalField(
        max_digits=14,
        decimal_places=2,
        validators=[MinValueValidator(Decimal("0.01"))],
        help_text="GPU-hours (MIG slices counted as their share of a GPU) per period, or "
        "money in the prices' currency (what the team's invoice says).",
    )
    period = models.CharField(max_length=8, choices=Period.choices, default=Period.MONTHLY)
    starts = models.DateField(null=True, blank=True, help_text="A custom period's first day.")
    ends = models.DateField(
        null=True, blank=True, help_text="A custom period's last day (included)."
    )
    thresholds = models.JSONField(
        default=default_thresholds,
        blank=True,
        help_text="Percentages of the budget at which the team is warned, once each per period.",
    )
    enforce = models.BooleanField(
        default=False,
        help_text="When the budget is spent, hold the team's LocalQueues (nothing new is "
        "admitted, running work goes on) until the period ends or an extension is granted.",
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["team__slug"]

    def __str__(self) -> str:
        return f"{self.team} budget"

    def clean(self) -> None:
        """A money budget needs prices (some price set); a custom period needs both ends, in
        order; a monthly one has none; thresholds are whole percentages, each once."""
        errors: dict[str, str] = {}
        if self.unit == self.Unit.MONEY and not Price.objects.exists():
            errors["unit"] = (
                "money budgets need prices: a platform admin sets them on Costs → Prices first"
            )
        if self.period == self.Period.CUSTOM:
            if self.starts is None:
                errors["starts"] = "A custom period needs its first day."
            if self.ends is None:
                errors["ends"] = "A custom period needs its last day."
            if self.starts and self.ends and self.ends < self.starts:
                errors["ends"] = "The last day comes before the first."
        elif self.starts is not None or self.ends is not None:
            errors["starts"] = "A monthly budget has no first or last day: leave them empty."
        problem = threshold_problem(self.thresholds)
        if problem:
            errors["thresholds"] = problem
        if errors:
            raise ValidationError(errors)


def threshold_problem(values: object) -> str:
    """What is wrong with a list of thresholds ("" when nothing)."""
    if not isinstance(values, list) or not values:
        return "Give at least one percentage, e.g. 80, 100."
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        return "Thresholds are whole percentages, e.g. 80, 100."
    if any(not 0 < v <= MOST_PERCENT for v in values):
        return f"Each threshold is a percentage from 1 to {MOST_PERCENT}."
    if len(set(values)) != len(values):
        return "Each threshold once."
    return ""


class BudgetWarning(models.Model):
    """A threshold reached in one period: the team is told once (the row's uniqueness
    says so, whichever process sees it first)."""

    budget = models.ForeignKey(Budget, on_delete=models.CASCADE, related_name="warnings")
    period_start = models.DateTimeField()
    threshold = models.PositiveIntegerField()
    spent = models.FloatField()
    limit = models.FloatField()
    at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["budget", "period_start", "threshold"], name="budget_warned_once"
            )
        ]

    def __str__(self) -> str:
        return f"{self.budget.team} {self.threshold}% ({self.period_start:%Y-%m-%d})"


class BudgetExtension(models.Model):
    """More of a budget for one period: the team's lead asks, a platform admin grants (or
    refuses); a grant raises the period's limit and so lifts a hold."""

    class State(models.TextChoices):
        PENDING = "pending", "Pending approval"
        APPROVED = "approved", "Granted"
        REJECTED = "rejected", "Refused"
        CANCELLED = "cancelled", "Withdrawn"

    budget = models.ForeignKey(Budget, on_delete=models.CASCADE, related_name="extensions")
    period_start = models.DateTimeField(help_text="The period it extends (its start).")
    amount = models.DecimalField(
        max_digits=14, decimal_places=2, validators=[MinValueValidator(Decimal("0.01"))]
    )
    reason = models.TextField()
    state = models.CharField(max_length=10, choices=State.choices, default=State.PENDING)
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+"
    )
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="+",
    )
    decided_at = models.DateTimeField(null=True, blank=True)
    decision_comment = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["budget"],
                condition=models.Q(state="pending"),
                name="one_pending_extension_per_budget",
                violation_error_message="This budget already has an extension waiting for a "
                "decision.",
            )
        ]

    def __str__(self) -> str:
        return f"Budget extension #{self.pk} ({self.budget.team})"
