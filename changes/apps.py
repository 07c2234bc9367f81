from django.apps import AppConfig


class ChangesConfig(AppConfig):
    name = "changes"
    verbose_name = "Reviewed changes"

    def ready(self) -> None:
        # lazy: models import only once the app registry is ready.
        from changes import drain, facts, metrics, quota
        from fleet import capacity
        from health import services as health
        from portal import removal
        from portal.infra import metrics as portal_metrics

        portal_metrics.register(metrics.change_gauges)
        portal_metrics.register(metrics.mig_change_totals)
        capacity.provide(facts.capacity_read)
        removal.explains(quota.quota_history_about)
        removal.closes(quota.void_quota_requests_about)
        health.suggests(drain.suggest_drains)
