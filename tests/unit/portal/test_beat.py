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
