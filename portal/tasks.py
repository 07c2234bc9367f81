"""Portal-wide Celery tasks (the worker finds its tasks in each app's ``tasks`` module)."""

from portal.notify import notify_task

__all__ = ["notify_task"]
