"""Portal-wide Celery tasks (the worker finds its tasks in each app's ``tasks`` module)."""

from portal.notify import deliver_task, mail_task, notify_task
from portal.outbox import relay_outbox_task

__all__ = ["deliver_task", "mail_task", "notify_task", "relay_outbox_task"]
