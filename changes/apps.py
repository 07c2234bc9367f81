from django.apps import AppConfig


class ChangesConfig(AppConfig):
    name = "changes"
    verbose_name = "Reviewed changes"

    def ready(self) -> None:
        # lazy: models import only once the app registry is ready.
        from changes import metrics
        from portal import metrics as portal_metrics

        portal_metrics.register(metrics.change_gauges)
