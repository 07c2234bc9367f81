"""Portal-wide Celery tasks (the worker finds its tasks in each app's ``tasks`` module)."""

from portal.infra.outbox import relay_outbox_task
from portal.notifications.send import deliver_task, mail_task, notify_task

__all__ = ["deliver_task", "mail_task", "notify_task", "relay_outbox_task"]
