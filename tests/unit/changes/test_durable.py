"""The changes' entry-point services (those pages, the API and tasks call) each run in a
transaction of their own: called inside another one they refuse before doing anything,
since their network reads and their commit hooks assume they are the outermost."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from django.contrib.auth.models import User
from django.db import transaction

from changes import mig, quota
from changes.models import MigChangeRequest, QuotaChangeRequest
from tenants.models import Team
from tests.factories import demo_quota_request

pytestmark = pytest.mark.django_db


ask_quota = demo_quota_request


def mig_request() -> MigChangeRequest:
    return MigChangeRequest.objects.create(
        team=Team.objects.get(slug="team-a"),
        requested_by=User.objects.get(username="lead-a"),
        nodes=["gpu-a100-03"],
        target_config="all-3g.40gb",
        reason="A test layout left behind.",
    )


ENTRY_POINTS: dict[str, Callable[[int, User], object]] = {
    "approve quota": lambda pk, u: quota.approve_quota_change(
        request_id=pk, approver=u, comment="ok"
    ),
    "reject quota": lambda pk, u: quota.reject_quota_change(
        request_id=pk, approver=u, comment="no"
    ),
    "cancel quota": lambda pk, u: quota.cancel_quota_change(request_id=pk, actor=u),
    "approve MIG": lambda pk, u: mig.approve_mig_change(request_id=pk, approver=u, comment=""),
    "reject MIG": lambda pk, u: mig.reject_mig_change(request_id=pk, approver=u, comment="no"),
    "cancel MIG": lambda pk, u: mig.cancel_mig_change(request_id=pk, actor=u),
    "rollback MIG": lambda pk, u: mig.rollback_mig_change(request_id=pk, actor=u),
    "abort MIG": lambda pk, u: mig.abort_mig_change(request_id=pk, actor=u),
}


@pytest.mark.parametrize("name", list(ENTRY_POINTS))
def test_an_entry_point_refuses_to_run_inside_another_transaction(demo: None, name: str) -> None:
    request = ask_quota() if "quota" in name else mig_request()
    with pytest.raises(RuntimeError, match="durable"), transaction.atomic():
        ENTRY_POINTS[name](request.pk, User.objects.get(username="admin"))
    request.refresh_from_db()
    assert request.state == "pending"


def test_asking_for_quota_refuses_to_run_inside_another_transaction(demo: None) -> None:
    with pytest.raises(RuntimeError, match="durable"), transaction.atomic():
        ask_quota()
    assert not QuotaChangeRequest.objects.exists()
