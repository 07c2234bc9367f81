"""The MIG change flow on the demo cluster: request, assess, approve, execute step by step,
fail, get stuck, roll back, and resume after a crash at every step."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import connection

import devcluster
from changes import executor, tasks
from changes import mig as changes
from changes.approval import TRANSITIONS, transition
from changes.executor import STEPS, advance
from changes.facts import fleet_facts
from changes.impact import flavor_shortfalls
from changes.models import MigChangeRequest, MigChangeStep, NodeClaim
from cluster.scope import settings_cluster
from kube import Gateway, ObjectRef
from loop.poll import poll_cluster
from portal.infra import outbox
from portal.models import AuditEvent
from portal.vocabulary.errors import DomainError
from queues.models import ClusterQueue
from tenants.models import Team
from tests.factories import MigChangeRequestFactory
from tests.support import protect_dev_pod, run_job_on_node, wait_for

# Every test starts from the demo scenario applied to a demo cluster and polled once.
pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("portal_cluster")]
INCIDENT = "gpu-a100-03"


def users() -> tuple[User, User, User]:
    return (
        User.objects.get(username="lead-a"),
        User.objects.get(username="approver"),
        User.objects.get(username="admin"),
    )


def ask(lead: User, **overrides: Any) -> MigChangeRequest:
    values = {
        "team": Team.objects.get(slug="team-a"),
        "nodes": [INCIDENT],
        "target_config": "all-3g.40gb",
        "reason": "gpu-a100-03 was left on a test layout; team-a's 3g.40gb jobs wait.",
    }
    return changes.request_mig_change(actor=lead, **{**values, **overrides})


def run_until_settled(
    request: MigChangeRequest, gateway: Gateway, *, timeout: float = 20, **kwargs: Any
) -> str:
    wait_for(
        lambda: advance(request.pk, gateway=gateway, **kwargs).kind != "wait",
        timeout=timeout,
        what="the change to settle",
    )
    request.refresh_from_db()
    return request.state


def node(gateway: Gateway) -> dict[str, Any]:
    return gateway.get(ObjectRef("v1", "Node", INCIDENT))


def test_the_seed_incident_end_to_end(gateway: Gateway) -> None:
    lead, approver, _ = users()
    request = ask(lead)
    # The dev queue counted on the test layout: its slices go, and the request carries the
    # matching ClusterQueue change so Kueue stops promising them; its 3g.40gb promise on
    # the same flavor was already unbacked (the failed layout made none), and is fixed too.
    assert (request.state, request.verdict) == ("pending", "breaks_quota")
    assert request.queue_changes == [
        {
            "cluster_queue": "cq-dev",
            "flavor": "a100-80gb-balanced",
            "resource": "nvidia.com/mig-1g.10gb",
            "from": 16,
            "to": 0,
        },
        {
            "cluster_queue": "cq-dev",
            "flavor": "a100-80gb-balanced",
            "resource": "nvidia.com/mig-2g.20gb",
            "from": 8,
            "to": 0,
        },
        {
            "cluster_queue": "cq-dev",
            "flavor": "a100-80gb-balanced",
            "resource": "nvidia.com/mig-3g.40gb",
            "from": 8,
            "to": 0,
        },
    ]
    assert any(n.startswith("Already unbacked") for n in request.assessment["notes"])
    assert [e["pod"] for e in request.assessment["evictions"]] == ["dev-test-1g"]
    # A bare pod: evicting it ends its work, and the approver is told so.
    (evicted,) = request.assessment["evictions"]
    assert (evicted["outcome"], evicted["ends_work"]) == ("deleted, nothing recreates it", True)
    assert (
        "Evicting ends work: team-b/dev-test-1g — deleted, nothing recreates it."
        in request.assessment["reasons"]
    )
    assert [s["pod"] for s in request.assessment["schedulable"]] == ["train-3g"]
    changes.approve_mig_change(request_id=request.pk, approver=approver, comment="Go ahead.")
    assert run_until_settled(request, gateway) == "succeeded"
    steps = list(MigChangeStep.objects.filter(request=request).values_list("step", "status"))
    assert steps == [*[(s, "done") for s in STEPS], ("queues", "done")]
    live = node(gateway)
    assert live["metadata"]["labels"]["nvidia.com/mig.config"] == "all-3g.40gb"
    assert live["metadata"]["labels"]["nvidia.com/mig.config.state"] == "success"
    assert not live["spec"].get("unschedulable")
    assert live["status"]["allocatable"]["nvidia.com/mig-3g.40gb"] == "16"
    # team-a's waiting pod now fits on the node.
    wait_for(
        lambda: (
            gateway.get(ObjectRef("v1", "Pod", "train-3g", "team-a"))["spec"].get("nodeName")
            == INCIDENT
        ),
        timeout=5,
        what="train-3g to be scheduled",
    )
    dev = ClusterQueue.objects.get(name="cq-dev").quota()
    assert (
        dev[("a100-80gb-balanced", "nvidia.com/mig-1g.10gb")],
        dev[("a100-80gb-balanced", "nvidia.com/mig-2g.20gb")],
        dev[("a100-80gb-balanced", "nvidia.com/mig-3g.40gb")],
    ) == (0, 0, 0)
    # Nothing the change touched is left promising what does not exist.
    assert [
        s
        for s in flavor_shortfalls(fleet_facts(cluster=settings_cluster()))
        if s.flavor == "a100-80gb-balanced"
    ] == []
    story = list(
        AuditEvent.objects.filter(target_type="changes.migchangerequest")
        .order_by("id")
        .values_list("event", flat=True)
    )
    assert story[:3] == ["mig_change.requested", "mig_change.approved", "mig_change.started"]
    assert story[-1] == "mig_change.succeeded"
    assert story.count("mig_change.step.done") == len(STEPS)
    # The pods it evicted stay named in the step record and the audit.
    evict = MigChangeStep.objects.get(request=request, step="evict")
    assert evict.pods == ["team-b/dev-test-1g"]
    assert evict.message.startswith("evicted team-b/dev-test-1g; ")
    recorded = AuditEvent.objects.get(event="mig_change.step.done", new__step="evict")
    assert recorded.new["evicted"] == ["team-b/dev-test-1g"]
    assert set(request.teams_hit.values_list("slug", flat=True)) == {"team-b", "team-dev"}


def test_nobody_approves_their_own_request(gateway: Gateway) -> None:
    _, _, admin = users()
    request = ask(admin)
    with pytest.raises(DomainError, match="cannot approve your own request"):
        changes.approve_mig_change(request_id=request.pk, approver=admin, comment="mine")
    request.refresh_from_db()
    assert request.state == "pending"


def test_only_approvers_decide_and_only_leads_ask(gateway: Gateway) -> None:
    lead, _, _ = users()
    request = ask(lead)
    member = User.objects.get(username="member-a")
    with pytest.raises(PermissionDenied):
        changes.approve_mig_change(request_id=request.pk, approver=member, comment="")
    with pytest.raises(PermissionDenied):
        ask(member)
    lead_b = User.objects.get(username="lead-b")
    with pytest.raises(PermissionDenied):
        ask(lead_b)  # on behalf of team-a


def test_a_blocked_request_is_refused_with_field_errors(gateway: Gateway) -> None:
    lead, _, _ = users()
    with pytest.raises(ValidationError) as caught:
        ask(lead, target_config="all-1g.5gb")
    assert "cannot be applied to A100-80GB" in caught.value.message_dict["target_config"][0]
    with pytest.raises(ValidationError) as caught:
        ask(lead, reason=" ", nodes=[])
    assert set(caught.value.message_dict) == {"reason", "nodes"}
    assert not MigChangeRequest.objects.exists()


def test_a_second_request_on_a_busy_node_is_blocked(gateway: Gateway) -> None:
    lead, _, _ = users()
    first = ask(lead)
    with pytest.raises(ValidationError) as caught:
        ask(lead, target_config="all-7g.80gb")
    assert f"already part of open request #{first.pk}" in str(caught.value)


def test_every_refused_transition_changes_nothing(gateway: Gateway) -> None:
    lead, approver, admin = users()
    request = ask(lead)
    changes.reject_mig_change(request_id=request.pk, approver=approver, comment="Not now.")
    for call in (
        lambda: changes.approve_mig_change(request_id=request.pk, approver=approver, comment=""),
        lambda: changes.cancel_mig_change(request_id=request.pk, actor=lead),
        lambda: changes.rollback_mig_change(request_id=request.pk, actor=admin),
    ):
        with pytest.raises(DomainError):
            call()
        request.refresh_from_db()
        assert request.state == "rejected"
    for state, targets in TRANSITIONS.items():
        for target in MigChangeRequest.State.values:
            request.state = state
            if target in targets:
                continue
            with pytest.raises(DomainError):
                transition(request, target)


def test_the_verdict_getting_worse_refuses_the_approval(
    gateway: Gateway, demo_cluster: devcluster.DemoCluster
) -> None:
    lead, approver, _ = users()
    request = ask(lead)
    from django.utils import timezone

    from cluster.models import ObservedNode

    ObservedNode.objects.filter(name=INCIDENT).update(
        gone_since=timezone.now()
    )  # the node vanished
    with pytest.raises(DomainError, match="verdict is now Blocked"):
        changes.approve_mig_change(request_id=request.pk, approver=approver, comment="ok")
    request.refresh_from_db()
    assert (request.state, request.verdict) == ("pending", "blocked")


@pytest.mark.django_db(transaction=True)
def test_concurrent_approvals_make_exactly_one_transition(
    settings: Any, demo_cluster: devcluster.DemoCluster
) -> None:
    lead, approver, admin = users()
    request = ask(lead)
    results: list[str] = []
    barrier = threading.Barrier(2)

    def decide(user: User) -> None:
        try:
            barrier.wait()
            changes.approve_mig_change(request_id=request.pk, approver=user, comment="yes")
            results.append("approved")
        except DomainError as exc:
            results.append(exc.code)
        finally:
            connection.close()

    threads = [threading.Thread(target=decide, args=(u,)) for u in (approver, admin)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    # Decisions take turns on the request's row: the second finds it already approved.
    assert sorted(results) == ["approved", "illegal_transition"]
    assert AuditEvent.objects.filter(event="mig_change.approved").count() == 1


@pytest.mark.parametrize("crash_after", STEPS)
def test_a_crash_after_any_step_resumes_without_repeating_it(
    gateway: Gateway, crash_after: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    lead, approver, _ = users()
    request = ask(lead)
    changes.approve_mig_change(request_id=request.pk, approver=approver, comment="ok")
    step = executor.HANDLERS[crash_after]

    def crash(context: executor.Step) -> executor.Outcome:
        step(context)  # the side effect happened; the worker dies before recording it
        raise SystemExit(f"simulated crash after {crash_after}")

    with monkeypatch.context() as patch, pytest.raises(SystemExit):
        patch.setitem(executor.HANDLERS, crash_after, crash)
        run_until_settled(request, gateway)
    assert run_until_settled(request, gateway) == "succeeded"
    records = MigChangeStep.objects.filter(request=request).exclude(step="queues")
    assert sorted(records.values_list("step", flat=True)) == sorted(STEPS)
    assert set(records.values_list("status", flat=True)) == {"done"}
    # The label was set once: MIG Manager reconfigured once (one success, no second pending).
    assert node(gateway)["metadata"]["labels"]["nvidia.com/mig.config.state"] == "success"


def test_mig_manager_failure_stops_in_failed_and_rollback_restores(gateway: Gateway) -> None:
    lead, approver, admin = users()
    gateway.patch_node_labels(INCIDENT, {"devcluster.quartermaster.io/fail-mig": "true"})
    request = ask(lead)
    changes.approve_mig_change(request_id=request.pk, approver=approver, comment="ok")
    assert run_until_settled(request, gateway) == "failed"
    assert "MIG Manager reported failed" in request.failure
    assert node(gateway)["spec"].get("unschedulable") is True  # left cordoned, safe
    gateway.patch_node_labels(INCIDENT, {"devcluster.quartermaster.io/fail-mig": None})
    changes.rollback_mig_change(request_id=request.pk, actor=admin)
    assert run_until_settled(request, gateway) == "rolled_back"
    live = node(gateway)
    assert live["metadata"]["labels"]["nvidia.com/mig.config"] == "all-balanced"
    assert not live["spec"].get("unschedulable")


def test_a_mig_manager_that_never_answers_is_stuck(
    gateway: Gateway, settings: Any, demo_cluster: devcluster.DemoCluster
) -> None:
    lead, approver, _ = users()
    settings.QM_MIG_STUCK_SECONDS = 0.5
    demo_cluster.controllers.options.mig_delay_seconds = 60
    request = ask(lead)
    changes.approve_mig_change(request_id=request.pk, approver=approver, comment="ok")
    assert run_until_settled(request, gateway) == "failed"
    assert "treated as stuck" in request.failure


def test_evictions_blocked_by_a_budget_give_up_with_a_clear_state(
    gateway: Gateway, settings: Any
) -> None:
    lead, approver, _ = users()
    settings.QM_EVICTION_TIMEOUT_SECONDS = 0.5
    protect_dev_pod(gateway)
    budget = ObjectRef("policy/v1", "PodDisruptionBudget", "dev", "team-b")
    wait_for(
        lambda: (gateway.get(budget).get("status") or {}).get("currentHealthy") == 1,
        what="the budget's controller to count its pod",
    )
    request = ask(lead)
    # The preview foresees it, naming the budget.
    assert (
        "The drain will be blocked: PodDisruptionBudget team-b/dev allows no disruption now "
        "(1 healthy, 1 needed), so team-b/dev-test-1g cannot be evicted; the change waits at "
        "evict and fails after the eviction timeout unless the budget allows it by then."
    ) in request.assessment["reasons"]
    (evicted,) = request.assessment["evictions"]
    assert (evicted["budget"], evicted["budget_allows"]) == ("team-b/dev", 0)
    changes.approve_mig_change(request_id=request.pk, approver=approver, comment="ok")
    assert run_until_settled(request, gateway) == "failed"
    # The failed step names the budget, in the API server's words (the budget qualified by
    # its namespace, so the one redaction rule hides it from other teams).
    assert request.failure.startswith("gpu-a100-03: evict failed: Gave up after ")
    assert request.failure.endswith(
        "team-b/dev-test-1g is held by PodDisruptionBudget team-b/dev (The disruption budget "
        "team-b/dev needs 1 healthy pods and has 1 currently)."
    )


def test_an_eviction_that_fails_a_job_is_foreseen_and_happens(
    gateway: Gateway, demo_cluster: devcluster.DemoCluster
) -> None:
    """A Job without retries left (backoffLimit 0, as Kueue's recorded Job) fails when its
    pod is evicted: the assessment says so, and the change makes it so."""
    lead, approver, _ = users()
    pod = run_job_on_node(demo_cluster, "dev-sweep", "team-b", INCIDENT)
    poll_cluster(gateway=gateway)
    request = ask(lead)
    rows = {e["pod"]: e for e in request.assessment["evictions"]}
    assert (rows[pod]["outcome"], rows[pod]["ends_work"]) == (
        "Job dev-sweep fails (backoffLimit 0)",
        True,
    )
    assert (
        f"Evicting ends work: team-b/{pod} — Job dev-sweep fails (backoffLimit 0); "
        "team-b/dev-test-1g — deleted, nothing recreates it."
    ) in request.assessment["reasons"]
    changes.approve_mig_change(request_id=request.pk, approver=approver, comment="ok")
    assert run_until_settled(request, gateway) == "succeeded"
    job = ObjectRef("batch/v1", "Job", "dev-sweep", "team-b")
    wait_for(
        lambda: any(
            c["type"] == "Failed" for c in gateway.get(job)["status"].get("conditions", [])
        ),
        what="the Job to fail",
    )
    status = gateway.get(job)["status"]
    failed = next(c for c in status["conditions"] if c["type"] == "Failed")
    assert (failed["reason"], failed["message"]) == (
        "BackoffLimitExceeded",
        "Job has reached the specified backoff limit",
    )
    # The evicted pod, and maybe its replacement too (podReplacementPolicy
    # TerminatingOrFailed starts one at once; on the reconfigured node it fails as well).
    assert status["failed"] >= 1


def test_success_means_nothing_until_allocatable_matches(gateway: Gateway) -> None:
    """A config that matches none of the GPUs reports success and changes nothing: verify
    catches a promise that the node does not keep."""
    lead, approver, _ = users()
    request = ask(lead)
    request.assessment["nodes"][0]["after"] = {"nvidia.com/mig-3g.40gb": 99}
    request.save()
    changes.approve_mig_change(request_id=request.pk, approver=approver, comment="ok")
    MigChangeRequest.objects.filter(pk=request.pk).update(
        assessment={
            **request.assessment,
            "nodes": [{**request.assessment["nodes"][0], "after": {"nvidia.com/mig-3g.40gb": 99}}],
        }
    )
    assert run_until_settled(request, gateway) == "failed"
    assert "promises mig-3g.40gb x 99 but gpu-a100-03 offers mig-3g.40gb x 16" in request.failure


# ----------------------------------------------------------------------------- one owner


@pytest.mark.django_db(transaction=True)
def test_concurrent_requests_for_one_node_leave_exactly_one_open(
    demo_cluster: devcluster.DemoCluster,
) -> None:
    lead, _, _ = users()
    barrier = threading.Barrier(6)
    results: list[str] = []

    def create() -> None:
        try:
            barrier.wait()
            ask(lead)
            results.append("created")
        except ValidationError as exc:
            results.append(" ".join(exc.messages))
        finally:
            connection.close()

    threads = [threading.Thread(target=create) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results.count("created") == 1, results
    assert MigChangeRequest.objects.filter(state="pending").count() == 1
    assert NodeClaim.objects.get(node=INCIDENT).request.state == "pending"


@pytest.mark.django_db(transaction=True)
def test_two_rollbacks_on_one_node_run_exactly_one(demo_cluster: devcluster.DemoCluster) -> None:
    lead, _, admin = users()
    done = [
        MigChangeRequestFactory(
            team=Team.objects.get(slug="team-a"),
            requested_by=lead,
            nodes=[INCIDENT],
            state="succeeded",
            target_config=config,
        )
        for config in ("all-3g.40gb", "all-balanced")
    ]
    barrier = threading.Barrier(2)
    results: list[str] = []

    def roll_back(request: MigChangeRequest) -> None:
        try:
            barrier.wait()
            changes.rollback_mig_change(request_id=request.pk, actor=admin)
            results.append("rolling back")
        except DomainError as exc:
            results.append(exc.code)
        finally:
            connection.close()

    threads = [threading.Thread(target=roll_back, args=(r,)) for r in done]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results) == ["node_busy", "rolling back"]
    states = sorted(
        MigChangeRequest.objects.filter(pk__in=[r.pk for r in done]).values_list("state", flat=True)
    )
    assert states == ["rolling_back", "succeeded"]


def test_a_failed_rollback_is_retried_afresh_to_success(gateway: Gateway, settings: Any) -> None:
    lead, approver, admin = users()
    request = ask(lead)
    changes.approve_mig_change(request_id=request.pk, approver=approver, comment="ok")
    assert run_until_settled(request, gateway) == "succeeded"
    gateway.patch_node_labels(INCIDENT, {"devcluster.quartermaster.io/fail-mig": "true"})
    changes.rollback_mig_change(request_id=request.pk, actor=admin)
    assert run_until_settled(request, gateway) == "failed"
    first = MigChangeStep.objects.get(request=request, round="rollback", step="wait")
    assert first.status == "failed"
    gateway.patch_node_labels(INCIDENT, {"devcluster.quartermaster.io/fail-mig": None})
    changes.rollback_mig_change(request_id=request.pk, actor=admin)
    rollback = MigChangeStep.objects.filter(request=request, round="rollback")
    assert not rollback.exists()  # every step of the round runs again, with a fresh deadline
    assert run_until_settled(request, gateway) == "rolled_back"
    # The node steps, then the queue quotas the change had lowered, moved back.
    assert sorted(rollback.values_list("step", flat=True)) == sorted([*STEPS, "queues"])
    dev = ClusterQueue.objects.get(name="cq-dev").quota()
    assert dev[("a100-80gb-balanced", "nvidia.com/mig-1g.10gb")] == 16
    assert all(s.started_at > first.started_at for s in rollback)
    assert node(gateway)["metadata"]["labels"]["nvidia.com/mig.config"] == "all-balanced"
    assert not NodeClaim.objects.exists()


def test_an_admin_aborts_a_running_change_at_the_next_step(gateway: Gateway) -> None:
    lead, approver, admin = users()
    protect_dev_pod(gateway)
    request = ask(lead)
    changes.approve_mig_change(request_id=request.pk, approver=approver, comment="ok")
    assert advance(request.pk, gateway=gateway).kind == "wait"  # evicting, blocked
    with pytest.raises(PermissionDenied):
        changes.abort_mig_change(request_id=request.pk, actor=approver)
    changes.abort_mig_change(request_id=request.pk, actor=admin)
    with pytest.raises(DomainError):
        changes.abort_mig_change(request_id=request.pk, actor=admin)  # once
    outcome = advance(request.pk, gateway=gateway)
    request.refresh_from_db()
    assert (outcome.kind, request.state) == ("failed", "failed")
    assert request.failure.startswith("Aborted by admin before evict on gpu-a100-03")
    assert node(gateway)["spec"].get("unschedulable") is True  # left cordoned
    assert node(gateway)["metadata"]["labels"]["nvidia.com/mig.config"] == "all-balanced"
    assert AuditEvent.objects.filter(event="mig_change.aborted").count() == 1
    gateway.delete(ObjectRef("policy/v1", "PodDisruptionBudget", "dev", "team-b"))
    changes.rollback_mig_change(request_id=request.pk, actor=admin)  # offered afterwards
    assert run_until_settled(request, gateway) == "rolled_back"
    assert not node(gateway)["spec"].get("unschedulable")


def test_rolling_back_a_change_aborted_before_its_label_step_only_uncordons(
    gateway: Gateway,
) -> None:
    """The issue's case: team-b's pods under a budget that allows no disruption, lead-b asks
    gpu-a100-01 -> all-2g.20gb, approved, it waits at evict; an admin aborts, then rolls
    back. The rollback undoes what ran (the cordon): no pod evicted, the node uncordoned,
    its config untouched. It used to run every step again and evict team-b's fillers once
    the budget went."""
    _, approver, admin = users()
    gateway.apply(
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "fillers", "namespace": "team-b"},
            "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"app": "filler"}}},
        }
    )
    budget = ObjectRef("policy/v1", "PodDisruptionBudget", "fillers", "team-b")
    wait_for(
        lambda: "disruptionsAllowed" in (gateway.get(budget).get("status") or {}),
        timeout=10,
        what="the status of PodDisruptionBudget fillers",
    )
    target = "gpu-a100-01"
    before = gateway.get(ObjectRef("v1", "Node", target))["metadata"]["labels"]
    request = ask(
        User.objects.get(username="lead-b"),
        team=Team.objects.get(slug="team-b"),
        nodes=[target],
        target_config="all-2g.20gb",
        reason="team-b's dev tests want 2g slices.",
    )
    changes.approve_mig_change(request_id=request.pk, approver=approver, comment="ok")
    assert advance(request.pk, gateway=gateway).kind == "wait"  # evict, held by the budget
    changes.abort_mig_change(request_id=request.pk, actor=admin)
    assert advance(request.pk, gateway=gateway).kind == "failed"
    assert executor.steps_that_ran(request, target) == {"cordon", "evict"}
    changes.rollback_mig_change(request_id=request.pk, actor=admin)
    # One run, nothing to wait for: the budget still stands, and nothing asks it.
    assert advance(request.pk, gateway=gateway).kind == "done"
    request.refresh_from_db()
    assert request.state == "rolled_back"
    rollback = MigChangeStep.objects.filter(request=request, round="rollback")
    assert list(rollback.values_list("node", "step", "status")) == [(target, "uncordon", "done")]
    assert not MigChangeStep.objects.filter(request=request).exclude(pods=[]).exists()
    live = gateway.get(ObjectRef("v1", "Node", target))
    assert not live["spec"].get("unschedulable")
    assert live["metadata"]["labels"]["nvidia.com/mig.config"] == before["nvidia.com/mig.config"]
    for name in ("filler-3g-0", "filler-3g-1"):
        pod = gateway.get(ObjectRef("v1", "Pod", name, "team-b"))
        assert "deletionTimestamp" not in pod["metadata"] and pod["spec"]["nodeName"] == target


class WorkerKilled(BaseException):
    """The worker process ends here (nothing after this line of the task runs)."""


def only_executions(published: list[Any]) -> Any:
    """A stand-in for the broker that keeps the executions' arguments (the approval's
    notifications by e-mail go out through it as well)."""

    def publish(task: str, args: list[Any]) -> None:
        if task == tasks.execute_mig_change_task.name:
            published.append(tuple(args))

    return publish


def test_a_worker_killed_as_it_schedules_the_continuation_leaves_one_that_runs(
    gateway: Gateway, monkeypatch: pytest.MonkeyPatch, django_capture_on_commit_callbacks: Any
) -> None:
    """The continuation is published, then the worker dies: the run's own message (acked
    late, so handed out again) still holds the change's token and goes on; the published
    one exits. Taking the token first would leave a token no message carries, and the
    change waiting for the two-minute sweep."""
    lead, approver, _ = users()
    protect_dev_pod(gateway)  # the change waits in its evict step
    published: list[tuple[Any, ...]] = []
    monkeypatch.setattr(tasks, "gateway_for", lambda cluster: gateway)
    monkeypatch.setattr(tasks, "cluster_configured", lambda: True)
    monkeypatch.setattr(outbox, "_publish", only_executions(published))
    request = ask(lead)
    with django_capture_on_commit_callbacks(execute=True):
        changes.approve_mig_change(request_id=request.pk, approver=approver, comment="ok")
    (first,) = published

    def publish_then_die(args: tuple[Any, ...], countdown: float) -> None:
        published.append(tuple(args))
        raise WorkerKilled

    monkeypatch.setattr(tasks.execute_mig_change_task, "apply_async", publish_then_die)
    with pytest.raises(WorkerKilled):
        tasks.execute_mig_change_task.run(*first)
    follow = published[-1]
    assert follow != first
    monkeypatch.setattr(
        tasks.execute_mig_change_task,
        "apply_async",
        lambda args, countdown: published.append(tuple(args)),
    )
    assert tasks.execute_mig_change_task.run(*follow).startswith("superseded")
    assert tasks.execute_mig_change_task.run(*first).startswith("wait")  # redelivered
    request.refresh_from_db()
    assert request.wake_token == published[-1][1]  # one live continuation again


def test_a_waiting_change_has_one_continuation_however_often_the_sweep_runs(
    gateway: Gateway, monkeypatch: pytest.MonkeyPatch, django_capture_on_commit_callbacks: Any
) -> None:
    """Celery's broker is the edge here: the tasks' bodies run, their scheduling is counted."""
    lead, approver, _ = users()
    protect_dev_pod(gateway)
    scheduled: list[tuple[int, str]] = []
    monkeypatch.setattr(tasks, "gateway_for", lambda cluster: gateway)
    monkeypatch.setattr(tasks, "cluster_configured", lambda: True)
    monkeypatch.setattr(outbox, "_publish", only_executions(scheduled))
    monkeypatch.setattr(
        tasks.execute_mig_change_task,
        "apply_async",
        lambda args, countdown: scheduled.append(tuple(args)),
    )
    request = ask(lead)
    with django_capture_on_commit_callbacks(execute=True):
        changes.approve_mig_change(request_id=request.pk, approver=approver, comment="ok")
    assert len(scheduled) == 1
    for _ in range(10):
        pending = list(scheduled)
        scheduled.clear()
        for args in pending:  # each scheduled run runs once (and a redelivered twin too)
            tasks.execute_mig_change_task.run(*args)
            tasks.execute_mig_change_task.run(*args)
        with django_capture_on_commit_callbacks(execute=True):
            tasks.resume_mig_changes_task()  # the sixty-second sweep
        assert len(scheduled) == 1, scheduled
    request.refresh_from_db()
    assert request.state == "running"
