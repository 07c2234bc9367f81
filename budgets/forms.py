"""The budgets page's forms: a budget (platform admins), an extension's request and its
decision. They check the shape; the services decide (their field errors land here)."""

from __future__ import annotations

from typing import Any

from django import forms

from budgets.models import Budget, default_thresholds


class ThresholdsField(forms.CharField):
    """Percentages typed as "80, 100"."""

    def to_python(self, value: Any) -> Any:
        text = super().to_python(value)
        if isinstance(text, list):
            return text
        parts = [p.strip().removesuffix("%").strip() for p in str(text or "").split(",")]
        try:
            return [int(p) for p in parts if p]
        except ValueError:
            raise forms.ValidationError(
                "Whole percentages, separated by commas: 80, 100."
            ) from None

    def prepare_value(self, value: Any) -> Any:
        if isinstance(value, list):
            return ", ".join(str(v) for v in value)
        return value


class BudgetForm(forms.ModelForm):  # type: ignore[type-arg]
    thresholds = ThresholdsField(
        required=False,
        initial=default_thresholds,
        help_text="Percentages of the budget at which the team is told, e.g. 80, 100.",
    )

    class Meta:
        model = Budget
        fields = ["team", "unit", "amount", "period", "starts", "ends", "thresholds", "enforce"]
        widgets = {
            "starts": forms.DateInput(attrs={"type": "date"}),
            "ends": forms.DateInput(attrs={"type": "date"}),
        }

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.instance.pk is not None:
            del self.fields["team"]  # a budget stays its team's


class ExtensionForm(forms.Form):
    amount = forms.DecimalField(
        label="GPU-hours to add",
        min_value=0.01,
        decimal_places=2,
        max_digits=14,
        help_text="For this period only, e.g. 200.",
    )
    reason = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 2}),
        max_length=2000,
        help_text="What it is for: the platform admin who decides reads it.",
    )


class DecisionForm(forms.Form):
    comment = forms.CharField(required=False, max_length=2000)
