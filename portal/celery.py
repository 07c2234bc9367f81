"""The Celery application: configured from Django settings (``CELERY_*``)."""

import os
from typing import Any

from celery import Celery
from celery.signals import before_task_publish, task_postrun, task_prerun

from portal.infra.metrics import TaskTimer
from portal.infra.observability import request_id

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings.dev")

app = Celery("quartermaster")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@before_task_publish.connect
def _carry_request_id(headers: dict[str, Any] | None = None, **_: Any) -> None:
    """A task queued while answering a request logs with that request's id."""
    rid = request_id.get()
    if rid and headers is not None:
        headers.setdefault("request_id", rid)


@task_prerun.connect
def _task_started(task_id: str = "", task: Any = None, **kwargs: Any) -> None:
    rid = getattr(task.request, "request_id", None) if task is not None else None
    request_id.set(rid or task_id)
    TaskTimer.prerun(task_id=task_id)


@task_postrun.connect
def _task_finished(task_id: str = "", task: Any = None, state: str = "", **_: Any) -> None:
    TaskTimer.postrun(task_id=task_id, task=task, state=state)
    request_id.set("")
