from django.apps import AppConfig


class LoopConfig(AppConfig):
    """The loop's processes: desired -> apply, fetch -> decode -> write -> drift, and their
    tasks (a Django app so that Celery finds ``loop.tasks``; it has no models)."""

    name = "loop"
    verbose_name = "Loop processes"

    def ready(self) -> None:
        # lazy: tasks import models, which load only once the app registry is ready.
        from loop import tasks
        from portal import desired

        # The one hook left between intent and the loop, and it points up: the apps that own
        # desired state (tenants, queues, fleet) sit below the loop and announce a change;
        # the loop applies it once the transaction commits.
        desired.subscribe(tasks.queue_apply)
