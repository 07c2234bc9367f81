from django.apps import AppConfig


class HealthConfig(AppConfig):
    name = "health"
    verbose_name = "GPU health"

    def ready(self) -> None:
        # lazy: models import only once the app registry is ready.
        from health import metrics
        from portal.infra import metrics as portal_metrics

        portal_metrics.register(metrics.health_gauges)
