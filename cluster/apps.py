from django.apps import AppConfig


class ClusterConfig(AppConfig):
    name = "cluster"
    verbose_name = "Cluster loop"

    def ready(self) -> None:
        # lazy: models and tasks import only once the app registry is ready.
        from celery.signals import worker_init
        from django.core import checks as django_checks

        from cluster import checks, connection, credentials, metrics, removal, selectors, tasks
        from portal import desired, health
        from portal import metrics as portal_metrics
        from portal import removal as portal_removal
        from queues import observed

        credentials.check_keys()  # a malformed key stops every process at start
        django_checks.register(checks.credentials_readable, django_checks.Tags.database)
        worker_init.connect(checks.refuse_to_start, weak=False)
        health.report("cluster credentials", checks.readiness)

        desired.subscribe(tasks.queue_apply)
        portal_removal.explains(removal.removed_from_cluster)
        health.report("kubernetes", connection.check_kubernetes)
        portal_metrics.register(metrics.loop_gauges)
        observed.provide(selectors.observed_kueue)
