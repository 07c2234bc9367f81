"""The prices page's forms: a price (model, profile, price per hour, from a day) and the cost
policy. The service validates; the form only reads the fields."""

from __future__ import annotations

from django import forms

from costs.models import CostPolicy, Price
from gpus.catalog import gpu_models


class PriceForm(forms.ModelForm):  # type: ignore[type-arg]
    class Meta:
        model = Price
        fields = ["gpu_model", "profile", "device_class", "per_hour", "effective_from", "note"]
        widgets = {"effective_from": forms.DateInput(attrs={"type": "date"})}
        labels = {
            "gpu_model": "GPU model",
            "profile": "MIG profile",
            "device_class": "DRA device class",
            "per_hour": "Price per hour",
        }
        help_texts = {
            "gpu_model": "A model of the catalog (A100-80GB); for a GPU without MIG, its "
            "nvidia.com/gpu.product label (NVIDIA-L40S).",
            "device_class": "A DeviceClass, e.g. gpu.nvidia.com or mig.nvidia.com: one hour of "
            "one device of the model allocated through it. Blank: a device without its class's "
            "price costs its share of the whole GPU (a MIG device its profile's price).",
        }

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.fields["gpu_model"].widget = forms.TextInput(attrs={"list": "gpu-models"})
        self.models = sorted(gpu_models())  # offered as the field's suggestions


class PolicyForm(forms.ModelForm):  # type: ignore[type-arg]
    class Meta:
        model = CostPolicy
        fields = ["currency", "idle_sharing"]
        labels = {"idle_sharing": "Idle capacity"}


class MonthForm(forms.Form):
    """``month``: YYYY-MM (none: this month); ``team``: a team's slug (the scope decides)."""

    month = forms.RegexField(
        regex=r"^(19[7-9]\d|2\d{3})-(0[1-9]|1[0-2])$",
        required=False,
        error_messages={"invalid": "A month is written YYYY-MM, e.g. 2026-11."},
    )
    team = forms.CharField(max_length=63, required=False)
