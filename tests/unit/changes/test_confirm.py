"""Destructive actions on a MIG change (cancel, abort, roll back, return to service) show
what they will do and ask to confirm on the pages; the rollback's words are the executor's
own plan (only the steps that ran are undone); the API acts at once."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone

from changes.executor import STEPS
from changes.models import MigChangeRequest, MigChangeStep
from portal.access.tokens import create_token
from tenants.models import Team
from tests.factories import MigChangeRequestFactory, ObservedPodFactory

pytestmark = pytest.mark.django_db
NODE = "gpu-a100-01"


def change_that_ran(state: str, steps: dict[str, str], **fields: Any) -> MigChangeRequest:
    """lead-b's change of gpu-a100-01 to all-2g.20gb, approved, with the apply round's
    ``steps`` (name: status) recorded as the executor records them."""
    change = MigChangeRequestFactory(
        team=Team.objects.get(slug="team-b"),
        requested_by=User.objects.get(username="lead-b"),
        decided_by=User.objects.get(username="approver"),
        nodes=[NODE],
        target_config="all-2g.20gb",
        previous_configs={NODE: "all-3g.40gb"},
        state=state,
        **fields,
    )
    for name, status in steps.items():
        MigChangeStep.objects.create(
            request=change, node=NODE, step=name, status=status, started_at=timezone.now()
        )
    return change


def text(html: bytes) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html.decode()))


@pytest.fixture
def fillers(demo: None) -> None:
    for i in (0, 1):
        ObservedPodFactory(
            namespace="team-b",
            name=f"filler-3g-{i}",
            node_name=NODE,
            phase="Running",
            gpu_requests={"nvidia.com/mig-3g.40gb": 8},
            last_changed=timezone.now(),
        )


def test_rolling_back_an_abort_before_the_label_step_says_it_only_uncordons(
    client: Client, fillers: None
) -> None:
    """The issue's case: aborted while it waited at evict; the rollback page says the node
    is uncordoned and no pod evicted, and asks before anything happens."""
    change = change_that_ran("failed", {"cordon": "done", "evict": "failed"})
    client.force_login(User.objects.get(username="admin"))
    detail = client.get(f"/changes/{change.pk}/").content.decode()
    assert f'class="button danger" href="/changes/{change.pk}/rollback/"' in detail
    page = client.get(f"/changes/{change.pk}/rollback/")
    shown = text(page.content)
    assert "Roll back this change?" in shown
    assert f"{NODE}: uncordoned (its MIG config was never changed); no pod is evicted." in shown
    assert "No pod is evicted and no MIG config is set." in shown and "filler" not in shown
    assert '<button type="submit" class="destructive">Roll back</button>' in page.content.decode()
    # A form sent without the confirm shows the same page and changes nothing.
    assert "Roll back this change?" in text(client.post(f"/changes/{change.pk}/rollback/").content)
    change.refresh_from_db()
    assert change.state == "failed"
    client.post(f"/changes/{change.pk}/rollback/", {"confirm": "yes"})
    change.refresh_from_db()
    assert change.state == "rolling_back"
    # The page names who rolled it back, as the audit recorded (not the approver).
    assert "Rollback asked by admin on" in text(client.get(f"/changes/{change.pk}/").content)


def test_rolling_back_a_change_that_relabelled_names_the_pods_and_the_config(
    client: Client, fillers: None
) -> None:
    moved = {
        "cluster_queue": "cq-dev",
        "flavor": "a100-80gb-balanced",
        "resource": "nvidia.com/mig-1g.10gb",
        "from": 16,
        "to": 0,
    }
    change = change_that_ran("succeeded", dict.fromkeys(STEPS, "done"), queues_moved=[moved])
    client.force_login(User.objects.get(username="admin"))
    shown = text(client.get(f"/changes/{change.pk}/rollback/").content)
    assert (
        f"{NODE}: cordoned, its GPU pods evicted (team-b/filler-3g-0, team-b/filler-3g-1), "
        "nvidia.com/mig.config set back to all-3g.40gb" in shown
    )
    assert (
        "ClusterQueue cq-dev: nominal quota of nvidia.com/mig-1g.10gb on a100-80gb-balanced "
        "set back from 0 to 16" in shown
    )
    assert "No pod is evicted" not in shown
    # A finished change's assessment is history, not a warning.
    detail = client.get(f"/changes/{change.pk}/").content.decode()
    assert 'class="card assessment verdict-past"' in detail
    assert "Impact as assessed before the decision" in detail


def test_cancel_and_abort_say_what_they_do_and_only_those_who_may_see_them(
    client: Client, demo: None
) -> None:
    pending = change_that_ran("approved", {})
    client.force_login(User.objects.get(username="lead-b"))  # the requester
    shown = text(client.get(f"/changes/{pending.pk}/cancel/").content)
    assert "Cancel this request?" in shown and "Its approval by approver is void." in shown
    assert "No node is cordoned, no pod evicted, no MIG config or quota changed." in shown
    assert client.get(f"/changes/{pending.pk}/rollback/").status_code == 403
    client.force_login(User.objects.get(username="lead-a"))  # another team's lead
    assert client.get(f"/changes/{pending.pk}/cancel/").status_code == 404
    running = change_that_ran("running", {"cordon": "done", "evict": "running"})
    MigChangeStep.objects.filter(request=running, step="evict").update(pods=["team-b/x"])
    client.force_login(User.objects.get(username="admin"))
    shown = text(client.get(f"/changes/{running.pk}/abort/").content)
    assert "The change stops before its next step" in shown
    assert "Pods it already evicted stay evicted: team-b/x." in shown
    assert client.get(f"/changes/{running.pk}/approve/").status_code == 405


def test_the_api_rolls_back_at_once(client: Client, demo: None) -> None:
    """The API's call is its own confirmation: no second step."""
    change = change_that_ran("failed", {"cordon": "done", "evict": "failed"})
    admin = User.objects.get(username="admin")
    _, secret = create_token(user=admin, name="t")
    answer = client.post(
        f"/api/v1/mig-changes/{change.pk}/rollback/", HTTP_AUTHORIZATION=f"Bearer {secret}"
    )
    assert answer.status_code == 200, answer.content
    change.refresh_from_db()
    assert change.state == "rolling_back"


def test_returning_a_drained_node_to_service_says_it_only_uncordons(
    client: Client, demo: None
) -> None:
    drain = MigChangeRequestFactory(
        kind="drain",
        team=None,
        requested_by=None,
        nodes=[NODE],
        target_config="",
        state="succeeded",
    )
    for name in ("cordon", "evict"):
        MigChangeStep.objects.create(
            request=drain, node=NODE, step=name, status="done", started_at=timezone.now()
        )
    client.force_login(User.objects.get(username="admin"))
    detail = client.get(f"/changes/{drain.pk}/").content.decode()
    assert "Return the node to service…</a>" in detail
    page = client.get(f"/changes/{drain.pk}/rollback/")
    shown = text(page.content)
    assert "Return the node to service?" in shown
    assert f"{NODE}: uncordoned (its GPUs return to the fleet); no pod is evicted." in shown
    assert '<button type="submit" class="destructive">Return to service</button>' in (
        page.content.decode()
    )
