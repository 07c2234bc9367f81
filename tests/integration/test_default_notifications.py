"""Told without subscribing, on the demo cluster: the person who asked for a change hears of
its decision and of its end, the members of a team it hits hear of its approval and end
(another team's pods unnamed), in the portal and, where their account has an address, by
e-mail into the run's file outbox; a person subscribed as well is told once, and a person
who turned the default notifications off only through their subscriptions."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from celery import current_app
from django.contrib.auth.models import User

from changes import mig as changes
from changes.executor import advance
from changes.models import MigChangeRequest
from changes.quota import approve_quota_change, cancel_quota_change, request_quota_change
from kube import Gateway
from portal.models import AuditEvent, Notification, OutboxMessage
from portal.notifications.subscriptions import create_subscription, set_told_by_default
from tenants.models import Namespace, Team
from tests.factories import ObservedPodFactory
from tests.support import wait_for

pytestmark = pytest.mark.django_db
INCIDENT = "gpu-a100-03"
FOREIGN = "secret-sweep-0"  # team-a's pod on the node: never named to team-b


def person(name: str) -> User:
    return User.objects.get(username=name)


def titles(name: str) -> list[str]:
    return list(
        Notification.objects.filter(user__username=name)
        .order_by("id")
        .values_list("title", flat=True)
    )


def ask() -> MigChangeRequest:
    return changes.request_mig_change(
        actor=person("lead-a"),
        team=Team.objects.get(slug="team-a"),
        nodes=[INCIDENT],
        target_config="all-3g.40gb",
        reason="gpu-a100-03 was left on a test layout.",
    )


def approve(request: MigChangeRequest, capture: Any) -> None:
    with capture(execute=True):
        changes.approve_mig_change(
            request_id=request.pk,
            approver=person("approver"),
            comment="ok",
            seen=request.assessment["fingerprint"],
        )


def send_the_mail(settings: Any, outbox: Path) -> list[str]:
    """The mail tasks the outbox holds, run here (eagerly) with the run command's file
    backend: each message the files hold. Two sends in one second may share a file (the
    backend names it by the second and its own id, which a collected backend's successor
    may take again): the messages are told apart by the line the backend ends each with."""
    settings.EMAIL_BACKEND = "django.core.mail.backends.filebased.EmailBackend"
    settings.EMAIL_FILE_PATH = str(outbox)
    for row in OutboxMessage.objects.filter(task="portal.notify.mail_task").order_by("pk"):
        current_app.tasks[row.task].apply(args=row.args).get()
    end = "\n" + "-" * 79 + "\n"
    return [
        message
        for path in sorted(outbox.glob("*.log"))
        for message in path.read_text().split(end)
        if message.strip()
    ]


def settle(request: MigChangeRequest, gateway: Gateway) -> str:
    wait_for(
        lambda: advance(request.pk, gateway=gateway).kind != "wait",
        timeout=20,
        what="the change to settle",
    )
    request.refresh_from_db()
    return request.state


@pytest.mark.usefixtures("portal_cluster")
def test_the_asker_and_the_team_hit_are_told_once_each_and_team_b_reads_no_team_a_pod(
    settings: Any,
    tmp_path: Path,
    portal_cluster: Gateway,
    django_capture_on_commit_callbacks: Any,
) -> None:
    settings.QM_PUBLIC_URL = "https://gpu.example.org"
    ObservedPodFactory(
        namespace="team-a",
        name=FOREIGN,
        node_name=INCIDENT,
        gpu_requests={"nvidia.com/mig-2g.20gb": 1},
    )
    # lead-a also follows team-a's decisions: one line all the same
    create_subscription(
        user=person("lead-a"),
        team=Team.objects.get(slug="team-a"),
        kinds=["decision"],
        channel="portal",
    )
    with django_capture_on_commit_callbacks(execute=True):
        request = ask()
    assert "team-b" in request.assessment["teams_hit"]
    asked = f"MIG change #{request.pk} requested: {INCIDENT} -> all-3g.40gb"
    assert titles("lead-a") == []  # not told of their own asking
    assert titles("lead-b") == [asked]  # a team hit hears before it runs
    approve(request, django_capture_on_commit_callbacks)

    approved = f"MIG change #{request.pk} approved"
    assert titles("lead-a") == [approved]
    assert titles("lead-b") == [asked, approved]
    assert titles("approver") == []  # not told of their own decision
    told_b = Notification.objects.get(user__username="lead-b", title=approved)
    assert "team-b/dev-test-1g on gpu-a100-03" in told_b.text
    assert FOREIGN not in told_b.title + told_b.text
    assert "another team's pod on gpu-a100-03" in told_b.text
    told_a = Notification.objects.get(user__username="lead-a")
    assert f"team-a/{FOREIGN}" in told_a.text  # their own pod, named

    mail = send_the_mail(settings, tmp_path / "mail")
    to_b = [m for m in mail if "To: lead-b@example.com" in m]
    assert [m for m in to_b if f"Subject: {asked}" in m]
    (to_b,) = [m for m in to_b if f"Subject: {approved}" in m]
    assert "team-b/dev-test-1g on gpu-a100-03" in to_b and FOREIGN not in to_b
    assert f"https://gpu.example.org/changes/{request.pk}/" in to_b
    # the approval: the asker (their portal subscription is no e-mail) and every member of
    # the teams hit (team-a's pod is evicted too, and team-dev's viewer is told), once
    # each; the approver is not told of their own act
    assert sorted(
        line.removeprefix("To: ")
        for m in mail
        if f"Subject: {approved}" in m
        for line in m.splitlines()
        if line.startswith("To: ")
    ) == [
        "lead-a@example.com",
        "lead-b@example.com",
        "member-a@example.com",
        "viewer-dev@example.com",
    ]

    assert settle(request, portal_cluster) == "succeeded"
    done = f"MIG change #{request.pk} succeeded"
    assert titles("lead-a")[1:] == [done]  # the asker: the outcome, once
    evicted = f"MIG change #{request.pk} evicted 1 pod of team team-b"
    assert sorted(titles("lead-b")[2:]) == sorted([done, evicted])
    assert all(FOREIGN not in n.text for n in Notification.objects.filter(user__username="lead-b"))


@pytest.mark.usefixtures("portal_cluster")
def test_a_person_who_turned_them_off_hears_only_what_they_subscribed_to(
    settings: Any, tmp_path: Path, django_capture_on_commit_callbacks: Any
) -> None:
    assert set_told_by_default(user=person("lead-b"), on=False)
    assert not set_told_by_default(user=person("lead-b"), on=False)  # already off
    assert (
        AuditEvent.objects.filter(
            event="notification_preference.changed", actor__username="lead-b"
        ).count()
        == 1
    )
    request = ask()
    approve(request, django_capture_on_commit_callbacks)
    assert titles("lead-b") == []  # neither the request nor its approval
    assert titles("lead-a") == [f"MIG change #{request.pk} approved"]
    assert [m for m in send_the_mail(settings, tmp_path) if "lead-b@example.com" in m] == []


def test_a_quota_request_tells_its_asker_and_team_of_the_approval_but_nobody_of_their_own_act(
    demo: None, django_capture_on_commit_callbacks: Any
) -> None:
    lead = person("lead-a")

    def asked(value: str) -> Any:
        return request_quota_change(
            actor=lead,
            team=Team.objects.get(slug="team-a"),
            kind="namespace",
            namespace=Namespace.objects.on_every_cluster().get(name="team-a"),
            resource="requests.nvidia.com/gpu",
            requested=value,
            reason="a deadline",
        )

    with django_capture_on_commit_callbacks(execute=True):
        first = asked("24")
    with django_capture_on_commit_callbacks(execute=True):
        approve_quota_change(request_id=first.pk, approver=person("approver"), comment="ok")
    said = f"Quota request #{first.pk} (team-a): approved"
    assert titles("lead-a") == titles("member-a") == [said]
    assert titles("approver") == titles("lead-b") == []
    with django_capture_on_commit_callbacks(execute=True):
        second = asked("28")
    with django_capture_on_commit_callbacks(execute=True):
        cancel_quota_change(request_id=second.pk, actor=lead)
    assert titles("lead-a") == [said]  # not told of their own cancelling
    assert titles("member-a") == [said]  # a cancelled request moved no quota
