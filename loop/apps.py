from django.apps import AppConfig


class LoopConfig(AppConfig):
    """The loop's processes: desired -> apply, fetch -> decode -> write -> drift, and their
    tasks (a Django app so that Celery finds ``loop.tasks``; it has no models)."""

    name = "loop"
    verbose_name = "Cluster loop"
