from django.apps import AppConfig


class QueuesConfig(AppConfig):
    name = "queues"

    def ready(self) -> None:
        # lazy: models import only once the app registry is ready.
        from portal.infra import metrics as portal_metrics
        from queues import metrics

        portal_metrics.register(metrics.queue_gauges)
        portal_metrics.register(metrics.waiting_gauges)
