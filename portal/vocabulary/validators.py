"""Field validators: Kubernetes names (the rules themselves are in
portal.vocabulary.names) and times that must not lie in the past."""

from __future__ import annotations

import datetime as dt

from django.core.exceptions import ValidationError
from django.utils import timezone

from portal.vocabulary.names import dns1123_label_errors, dns1123_subdomain_errors


def validate_dns1123_label(value: str) -> None:
    """A DNS-1123 label (namespaces, team slugs, LocalQueues, node pools)."""
    errors = dns1123_label_errors(value)
    if errors:
        raise ValidationError(errors)


def validate_dns1123_subdomain(value: str) -> None:
    """A DNS-1123 subdomain (most cluster-scoped object names)."""
    errors = dns1123_subdomain_errors(value)
    if errors:
        raise ValidationError(errors)


# A time typed a moment ago (a form filled in slowly, a clock a little behind) is not past.
PAST_GRACE = dt.timedelta(minutes=1)


def validate_not_past(value: dt.datetime | None) -> None:
    """A time at which something is to happen: now or later (a minute's grace)."""
    if value is not None and value < timezone.now() - PAST_GRACE:
        shown = timezone.localtime(value).strftime("%Y-%m-%d %H:%M")
        raise ValidationError(
            f"{shown} is in the past: leave it empty for as soon as possible, or pick a later "
            "time.",
            code="past",
        )
