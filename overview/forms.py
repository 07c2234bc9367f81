"""The Fleet page's node search: a pool, and words a node's name contains or labels it
carries (``key=value``), every one of them."""

from __future__ import annotations

from typing import Any

from django import forms

from overview.selectors import NO_POOL, Pools
from portal.vocabulary.names import label_value_errors, qualified_name_errors

SEARCH_HELP = "Words in the node's name, or labels as key=value; a node matches every one."


class NodeSearchForm(forms.Form):
    q = forms.CharField(
        label="Name or label", max_length=253, required=False, help_text=SEARCH_HELP
    )
    pool = forms.CharField(label="Pool", required=False)

    def __init__(self, *args: Any, pools: Pools, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.pools = pools
        self.pool_choices = [("", "All pools"), *pools.choices(), (NO_POOL, NO_POOL)]

    def clean_pool(self) -> str:
        """A pool of the list; a name two clusters' pools share is an error until the
        cluster is chosen (``cluster/pool`` names one, as the list does)."""
        name = str(self.cleaned_data.get("pool") or "")
        if not name:
            return ""
        clusters = self.pools.clusters_of(name)
        if len(clusters) > 1:
            raise forms.ValidationError(
                f"Pool {name} is on the clusters {', '.join(clusters)}: choose the cluster."
            )
        if self.pools.index(name) is None:
            raise forms.ValidationError(
                f"Select a valid choice. {name} is not one of the available choices."
            )
        return name

    def clean_q(self) -> dict[str, Any]:
        """The words as ``{"names": [...], "labels": {key: value}}``; a label that could not
        be one (a bad key or value) is an error naming it."""
        names: list[str] = []
        labels: dict[str, str] = {}
        problems: list[str] = []
        for word in str(self.cleaned_data.get("q") or "").split():
            key, equals, value = word.partition("=")
            if not equals:
                names.append(word)
                continue
            errors = [f"the key {e}" for e in qualified_name_errors(key)]
            errors += [f"the value {e}" for e in label_value_errors(value)]
            if errors:
                problems.append(f"{word!r} is not a label as key=value: {'; '.join(errors)}.")
            elif labels.get(key, value) != value:
                problems.append(f"A node carries one value of {key}: {labels[key]!r} or {value!r}.")
            labels[key] = value
        if problems:
            raise forms.ValidationError(problems)
        return {"names": names, "labels": labels}

    def pool_index(self) -> int | None:
        """The chosen pool's place (None: every pool); call after ``is_valid()``."""
        name = self.cleaned_data.get("pool") or ""
        return self.pools.index(name) if name else None
