"""Forms for MIG change requests (the same validation as the services, shown per field)."""

from __future__ import annotations

from typing import Any

from django import forms

from fleet.changes import fleet_facts, teams_user_may_request_for
from fleet.impact import valid_configs


class MigChangeForm(forms.Form):
    team = forms.ModelChoiceField(queryset=None, empty_label=None, help_text="On whose behalf.")
    nodes = forms.MultipleChoiceField(widget=forms.CheckboxSelectMultiple, required=False)
    target_config = forms.ChoiceField(label="Target MIG config", required=False)
    reason = forms.CharField(widget=forms.Textarea(attrs={"rows": 3}), required=False)
    window_start = forms.DateTimeField(
        required=False,
        label="Not before (optional)",
        widget=forms.DateTimeInput(attrs={"type": "datetime-local"}),
        help_text="Leave empty to run as soon as it is approved.",
    )

    def __init__(self, *args: Any, user: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fleet = fleet_facts()
        self.fields["team"].queryset = teams_user_may_request_for(user)  # type: ignore[attr-defined]
        gpu_nodes = [n for n in self.fleet.nodes if n.model]
        self.fields["nodes"].choices = [
            (
                n.name,
                f"{n.name} — {n.model}, now {n.mig_config or 'no config'}"
                f"{' (' + n.mig_state + ')' if n.mig_state and n.mig_state != 'success' else ''}",
            )
            for n in sorted(gpu_nodes, key=lambda n: n.name)
        ]
        if self.is_bound and hasattr(self.data, "getlist"):
            chosen = self.data.getlist("nodes")
        else:
            chosen = list(self.initial.get("nodes") or [])
        by_name = {n.name: n for n in gpu_nodes}
        picked = [by_name[n] for n in chosen if n in by_name]
        if picked:
            offered = set(valid_configs(picked[0], self.fleet))
            for node in picked[1:]:
                offered &= set(valid_configs(node, self.fleet))
            configs = sorted(offered)
            hint = f"Configs valid for {picked[0].model}."
        else:
            configs = []
            hint = "Choose nodes first: only configs their GPU model can take are offered."
        self.fields["target_config"].choices = [("", "—")] + [(c, c) for c in configs]
        self.fields["target_config"].help_text = hint
