"""Reads of reviewed changes, always for the acting user: another team's request is a 404,
never a 403. Approvers and platform admins see every request."""

from __future__ import annotations

from typing import TypeVar

from django.db.models import Model, QuerySet
from django.http import Http404

from changes.approval import (
    Actions,
    User,
    may_decide,
    mig_change_actions,
    quota_request_actions,
)
from changes.models import MigChangeRequest, QuotaChangeRequest
from portal.permissions import sees_every_team

R = TypeVar("R", bound=Model)


def _visible(requests: QuerySet[R], user: User) -> QuerySet[R]:
    if sees_every_team(user):
        return requests
    return requests.filter(team__memberships__user_id=user.pk).distinct()


def list_mig_changes_for_user(user: User) -> QuerySet[MigChangeRequest]:
    """MIG changes and drains of the user's teams (all of them for approvers and admins)."""
    return _visible(
        MigChangeRequest.objects.select_related("team", "requested_by", "decided_by"), user
    )


def get_mig_change_for_user(user: User, request_id: int) -> MigChangeRequest:
    """404 for requests of other teams, as if they did not exist."""
    try:
        return list_mig_changes_for_user(user).get(pk=request_id)
    except MigChangeRequest.DoesNotExist:
        raise Http404("No such request.") from None


def get_mig_change_with_actions(user: User, request_id: int) -> tuple[MigChangeRequest, Actions]:
    """The request and what the user may do with it now."""
    change = get_mig_change_for_user(user, request_id)
    return change, mig_change_actions(user, change)


def list_quota_requests_for_user(user: User) -> QuerySet[QuotaChangeRequest]:
    """Quota requests of the user's teams (all of them for approvers and admins)."""
    return _visible(
        QuotaChangeRequest.objects.select_related(
            "team", "namespace", "cluster_queue", "requested_by", "decided_by", "auto_rule"
        ),
        user,
    )


def get_quota_request_for_user(user: User, request_id: int) -> QuotaChangeRequest:
    try:
        return list_quota_requests_for_user(user).get(pk=request_id)
    except QuotaChangeRequest.DoesNotExist:
        raise Http404("No such request.") from None


def get_quota_request_with_actions(
    user: User, request_id: int
) -> tuple[QuotaChangeRequest, Actions]:
    change = get_quota_request_for_user(user, request_id)
    return change, quota_request_actions(user, change)


def inbox(user: User, visible: QuerySet[R]) -> list[R]:
    """The pending requests a user may decide: others' requests, for deciders only."""
    if not may_decide(user):
        return []
    return list(visible.filter(state="pending").exclude(requested_by_id=user.pk))
