"""The filters of the request lists: the same on the pages and in the API."""

from __future__ import annotations

import django_filters

from changes.models import MigChangeRequest, QuotaChangeRequest


class MigChangeFilter(django_filters.FilterSet):
    class Meta:
        model = MigChangeRequest
        fields = ["kind", "state", "verdict", "target_config"]


class QuotaRequestFilter(django_filters.FilterSet):
    class Meta:
        model = QuotaChangeRequest
        fields = ["state", "kind"]
