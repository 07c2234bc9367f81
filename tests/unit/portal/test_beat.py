"""Every periodic task beat sends is one the worker knows (a misspelt name would be dropped
by the worker with an error nobody reads)."""

from __future__ import annotations

from django.conf import settings

from portal.celery import app


def test_every_beat_entry_names_a_registered_task() -> None:
    app.loader.import_default_modules()  # what the worker does at start: every tasks module
    names = {entry["task"] for entry in settings.CELERY_BEAT_SCHEDULE.values()}
    assert "portal.outbox.relay_outbox_task" in names
    assert names <= set(app.tasks), names - set(app.tasks)


# Beat's schedule and the outbox's unsent rows store a task by its registered name: a task
# whose module moves keeps its name (``name=`` on the task), and a new task adds its own here.
REGISTERED = {
    "budgets.tasks.check_budgets_task",
    "changes.tasks.execute_mig_change_task",
    "changes.tasks.expire_quota_grants_task",
    "changes.tasks.resume_mig_changes_task",
    "costs.tasks.record_busy_task",
    "cluster.tasks.apply_all_clusters_task",
    "cluster.tasks.apply_desired_state_task",
    "cluster.tasks.poll_all_clusters_task",
    "cluster.tasks.poll_cluster_task",
    "health.tasks.collect_all_gpu_health_task",
    "health.tasks.collect_gpu_health_task",
    "idle.tasks.enforce_idle_policy_task",
    "portal.notify.deliver_task",
    "portal.notify.mail_task",
    "portal.notify.notify_task",
    "portal.outbox.relay_outbox_task",
    "usage.tasks.roll_up_task",
    "usage.tasks.take_sample_task",
}
BEAT = {
    "relay-outbox": "portal.outbox.relay_outbox_task",
    "resume-mig-changes": "changes.tasks.resume_mig_changes_task",
    "expire-quota-grants": "changes.tasks.expire_quota_grants_task",
    "poll-clusters": "cluster.tasks.poll_all_clusters_task",
    "sample-usage": "usage.tasks.take_sample_task",
    "roll-up-usage": "usage.tasks.roll_up_task",
    "check-budgets": "budgets.tasks.check_budgets_task",
    "collect-gpu-health": "health.tasks.collect_all_gpu_health_task",
    "record-busy-gpu-hours": "costs.tasks.record_busy_task",
    "reapply-desired-state": "cluster.tasks.apply_all_clusters_task",
}


def test_the_registered_task_names_stay_as_they_were() -> None:
    app.loader.import_default_modules()
    assert {name for name in app.tasks if not name.startswith("celery.")} == REGISTERED


def test_beat_sends_the_tasks_it_always_sent() -> None:
    assert {key: entry["task"] for key, entry in settings.CELERY_BEAT_SCHEDULE.items()} == BEAT
