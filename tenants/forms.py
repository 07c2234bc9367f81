"""The quota request form (the service gives the field errors)."""

from __future__ import annotations

from typing import Any

from django import forms

from queues.models import ClusterQueue
from tenants.models import Namespace, QuotaChangeRequest, Team


class QuotaRequestForm(forms.Form):
    team = forms.ModelChoiceField(queryset=Team.objects.none(), empty_label=None)
    kind = forms.ChoiceField(choices=QuotaChangeRequest.Kind.choices, label="What")
    namespace = forms.ModelChoiceField(
        queryset=Namespace.objects.none(), required=False, help_text="For a namespace quota."
    )
    cluster_queue = forms.ModelChoiceField(
        queryset=ClusterQueue.objects.none(),
        required=False,
        label="ClusterQueue",
        help_text="For a queue's nominal quota.",
    )
    flavor = forms.CharField(required=False, help_text="The queue's flavor, e.g. h100-80gb.")
    resource = forms.CharField(
        initial="requests.nvidia.com/gpu",
        help_text="requests.nvidia.com/gpu for a namespace; nvidia.com/gpu for a queue.",
    )
    requested = forms.CharField(label="New value")
    grant_until = forms.DateTimeField(
        required=False,
        label="Until (optional)",
        widget=forms.DateTimeInput(attrs={"type": "datetime-local"}),
        help_text="A time-limited grant reverts by itself.",
    )
    reason = forms.CharField(widget=forms.Textarea(attrs={"rows": 3}), required=False)

    def __init__(self, *args: Any, teams: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["team"].queryset = teams  # type: ignore[attr-defined]
        self.fields["namespace"].queryset = Namespace.objects.filter(team__in=teams)  # type: ignore[attr-defined]
        self.fields["cluster_queue"].queryset = ClusterQueue.objects.filter(  # type: ignore[attr-defined]
            local_queues__namespace__team__in=teams
        ).distinct()
