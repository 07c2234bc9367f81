"""The Usage page's choice of period and team: the API's ``?days=`` and ``?team=`` read the
same way, a bad value refused next to its field."""

from __future__ import annotations

from django import forms

DAYS = (1, 7, 30, 90)
DEFAULT_DAYS = 7


class UsageFilterForm(forms.Form):
    """``days``: one of DAYS (none given: 7); ``team``: a team's slug (whether it is one of
    the user's is the scope's question: another is a 404)."""

    days = forms.TypedChoiceField(
        label="Period",
        choices=[(d, d) for d in DAYS],
        coerce=int,
        required=False,
        empty_value=None,
        error_messages={"invalid_choice": "Choose a period of 1, 7, 30 or 90 days."},
    )
    team = forms.CharField(label="Team", max_length=63, required=False)

    def clean_days(self) -> int:
        return self.cleaned_data["days"] or DEFAULT_DAYS
