"""One redaction rule at every output channel: a failed MIG change whose failure names
another team's pods and PodDisruptionBudget reaches the asking team's lead in-portal, by
e-mail, Slack, Teams and webhook without those names, and an approver still reads them."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.core import mail
from django.test import Client
from django.utils import timezone

from changes.executor import _held
from changes.models import MigChangeRequest
from changes.notify import notify
from kube.errors import EvictionBlocked
from portal.models import Notification, NotificationSubscription, OutboxMessage
from portal.notifications.payloads import RENDERERS, message_from_json
from portal.notifications.send import deliver
from tenants.models import Namespace
from tests.factories import MigChangeRequestFactory, ObservedNodeFactory, ObservedPodFactory

pytestmark = pytest.mark.django_db

FOREIGN = ("gang-eval-worker-0", "gang-eval-worker-1", "gang-eval-keep")
CHANNELS = {
    "portal": "",
    "email": "lead-a@example.org",
    "slack": "https://hooks.slack.com/services/T0001/B0002/secretsecretsecret7IsoQ",
    "teams": "https://example.webhook.office.com/webhookb2/x",
    "webhook": "https://hooks.example.org/qm",
}


def blocked_failure() -> str:
    """The failure text the executor writes when team-b's budget holds its gang's pods."""
    budget = EvictionBlocked(
        "Cannot evict pod as it would violate the pod's disruption budget.",
        status=429,
        body={
            "details": {
                "causes": [
                    {
                        "reason": "DisruptionBudget",
                        "message": "The disruption budget gang-eval-keep needs 2 healthy pods "
                        "and has 2 currently",
                    }
                ]
            }
        },
    )
    held = "; ".join(_held("team-b", pod, budget) for pod in FOREIGN[:2])
    return f"Gave up after 900 s: GPU pods still on the node (2). {held}."


def failed_change(team_a: Any, lead: Any) -> MigChangeRequest:
    Namespace.objects.create(name="team-a", team=team_a)
    change: MigChangeRequest = MigChangeRequestFactory(
        team=team_a, requested_by=lead, nodes=["gpu-1"], state="failed"
    )
    change.failure = blocked_failure()
    change.save(update_fields=["failure"])
    return change


def payloads_sent() -> dict[str, str]:
    """Every channel's body as the senders build it: the in-portal lines, the e-mail
    (locmem backend, sent by ``deliver``) and the Slack, Teams and webhook bodies."""
    mail.outbox.clear()
    said = {"portal": " ".join(f"{n.title} {n.text}" for n in Notification.objects.all())}
    for row in OutboxMessage.objects.filter(task="portal.notify.deliver_task"):
        sub = NotificationSubscription.objects.get(pk=row.args[0])
        message = message_from_json(row.args[1])
        if sub.channel == "email":
            deliver(sub.pk, message)
            said["email"] = " ".join(f"{m.subject} {m.body}" for m in mail.outbox)
        else:
            said[sub.channel] = json.dumps(RENDERERS[sub.channel](message))
    return said


def test_a_lead_of_another_team_reads_no_foreign_pod_or_budget_name_on_any_channel(
    team_a_admin: Any, team_a: Any, team_b: Any, approver: Any, settings: Any
) -> None:
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    Namespace.objects.create(name="team-b", team=team_b)
    change = failed_change(team_a, team_a_admin)
    assert all(name in change.failure for name in FOREIGN)
    for channel, target in CHANNELS.items():
        NotificationSubscription.objects.create(
            user=team_a_admin, team=team_a, kinds=["failed"], channel=channel, target=target
        )
    notify("failed", change)
    said = payloads_sent()
    assert set(said) == set(CHANNELS)
    for channel, body in said.items():
        leaked = [name for name in FOREIGN if name in body]
        assert not leaked, f"{channel} names {leaked}: {body[:400]}"
        assert "another team's pod" in body, channel
    # the change's page and the API say it the same way
    client = Client()
    client.force_login(team_a_admin)
    page = client.get(f"/changes/{change.pk}/").content.decode()
    api = client.get(f"/api/v1/mig-changes/{change.pk}/").content.decode()
    for text in (page, api):
        assert not [name for name in FOREIGN if name in text]
        assert "another team&#x27;s PodDisruptionBudget" in text or (
            "another team's PodDisruptionBudget" in text
        )


def test_an_approver_reads_the_names(
    team_a_admin: Any, team_a: Any, team_b: Any, approver: Any
) -> None:
    Namespace.objects.create(name="team-b", team=team_b)
    change = failed_change(team_a, team_a_admin)
    NotificationSubscription.objects.create(
        user=approver, team=None, kinds=["failed"], channel="portal", target=""
    )
    notify("failed", change)
    text = Notification.objects.get(user=approver).text
    assert "team-b/gang-eval-keep" in text and "team-b/gang-eval-worker-0" in text


def test_a_namespace_name_the_lead_owns_on_one_cluster_is_another_teams_on_the_other(
    team_a_admin: Any, team_a: Any, team_b: Any
) -> None:
    """Namespaces are per cluster: team-a owns "shared" on the settings' cluster, team-b
    owns "shared" on the inference cluster. Team-a's lead reads team-b's pods there as
    another team's, on the node page, the GPU health API and the notification of team-a's
    own MIG change on that cluster that was held by them."""
    from cluster.models import Cluster
    from cluster.scope import settings_cluster
    from health.models import NodeHealth

    train = settings_cluster()
    infer = Cluster.objects.create(name="inference", display_name="Inference", connection="token")
    Namespace.objects.create(cluster=train, name="shared", team=team_a)
    Namespace.objects.create(cluster=infer, name="a-serve", team=team_a)
    Namespace.objects.create(cluster=infer, name="shared", team=team_b)
    ObservedNodeFactory(cluster=infer, name="gpu-b-01")
    ObservedPodFactory(
        cluster=infer, namespace="shared", name="their-trainer-0", node_name="gpu-b-01"
    )
    ObservedPodFactory(
        cluster=infer, namespace="a-serve", name="our-server-0", node_name="gpu-b-01"
    )
    NodeHealth.objects.create(
        cluster=infer,
        node="gpu-b-01",
        observed_at=timezone.now(),
        worst="critical",
        findings=[],
        gpus=[
            {
                "index": 0,
                "instances": [
                    {"profile": "1g.10gb", "instance": 1, "namespace": "shared", "pod": "their-x"}
                ],
            }
        ],
    )
    client = Client()
    client.force_login(team_a_admin)
    page = client.get("/fleet/nodes/gpu-b-01/?cluster=inference").content.decode()
    assert "our-server-0" in page
    assert "their-trainer-0" not in page
    (row,) = client.get("/api/v1/gpu-health/?cluster=inference").json()
    assert row["gpus"][0]["instances"][0]["pod"] == "(another team's pod)"
    assert "their-x" not in json.dumps(row)

    change: MigChangeRequest = MigChangeRequestFactory(
        cluster=infer, team=team_a, requested_by=team_a_admin, nodes=["gpu-b-01"], state="failed"
    )
    change.failure = (
        "Gave up after 900 s: GPU pods still on the node (1). "
        "shared/their-trainer-0 is held by PodDisruptionBudget shared/keep."
    )
    change.save(update_fields=["failure"])
    NotificationSubscription.objects.create(
        user=team_a_admin, team=team_a, kinds=["failed"], channel="portal", target=""
    )
    notify("failed", change)
    text = Notification.objects.get(user=team_a_admin).text
    assert "their-trainer-0" not in text and "shared/keep" not in text, text
    assert "another team's pod" in text
