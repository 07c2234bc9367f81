from django.apps import AppConfig


class ClusterConfig(AppConfig):
    name = "cluster"
    verbose_name = "Cluster loop"

    def ready(self) -> None:
        # lazy: models and tasks import only once the app registry is ready.
        from cluster import connection, metrics, removal, selectors, tasks
        from portal import desired, health
        from portal import metrics as portal_metrics
        from portal import removal as portal_removal
        from queues import observed

        desired.subscribe(tasks.queue_apply)
        portal_removal.explains(removal.removed_from_cluster)
        health.report("kubernetes", connection.check_kubernetes)
        portal_metrics.register(metrics.loop_gauges)
        observed.provide(selectors.observed_kueue)
