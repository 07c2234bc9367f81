"""The filters of the tenants' lists (the API's ``/namespaces/`` and ``/memberships/``)."""

from __future__ import annotations

from cluster.api_scope import ClusterFilter
from portal.api.filters import StrictFilterSet, TeamFilter
from tenants.models import Membership, Namespace
from tenants.selectors import list_teams_for_user


class NamespaceFilter(StrictFilterSet):
    cluster = ClusterFilter()
    team = TeamFilter(teams=list_teams_for_user)

    class Meta:
        model = Namespace
        fields = ["cluster", "team"]


class MembershipFilter(StrictFilterSet):
    team = TeamFilter(teams=list_teams_for_user)

    class Meta:
        model = Membership
        fields = ["team", "role"]
