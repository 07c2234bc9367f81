"""Labels the portal stamps on every object it renders, so it can find (and only touch) its own."""

from __future__ import annotations

from django.conf import settings

MANAGED_BY_KEY = "app.kubernetes.io/managed-by"
MANAGED_BY_VALUE = "quartermaster"


def team_label_key() -> str:
    return f"{settings.QM_LABEL_DOMAIN}/team"


def managed_labels(team: str | None = None) -> dict[str, str]:
    labels = {MANAGED_BY_KEY: MANAGED_BY_VALUE}
    if team:
        labels[team_label_key()] = team
    return labels
