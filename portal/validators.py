"""Model field validators for Kubernetes names (the rules themselves are in portal.names)."""

from __future__ import annotations

from django.core.exceptions import ValidationError

from portal.names import dns1123_label_errors, dns1123_subdomain_errors


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
