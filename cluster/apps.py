from typing import Any

from django.apps import AppConfig
from django.apps import apps as global_apps

from cluster.scope import settings_cluster_of


class ClusterConfig(AppConfig):
    name = "cluster"
    verbose_name = "Cluster loop"

    def ready(self) -> None:
        # lazy: models and tasks import only once the app registry is ready.
        from celery.signals import worker_init
        from django.core import checks as django_checks
        from django.db.models.signals import post_migrate

        from cluster import checks, connection, credentials, metrics, removal
        from portal import removal as portal_removal
        from portal.infra import metrics as portal_metrics
        from portal.infra import readiness as health

        # A database emptied by `flush` gets its settings' cluster back, as migration 0010
        # made it (every cluster key's default names it).
        post_migrate.connect(the_settings_cluster, sender=self)
        credentials.check_keys()  # a malformed key stops every process at start
        django_checks.register(checks.credentials_readable, django_checks.Tags.database)
        worker_init.connect(checks.refuse_to_start, weak=False)
        health.report("cluster credentials", checks.readiness)

        portal_removal.explains(removal.removed_from_cluster)
        health.report("kubernetes", connection.check_kubernetes)
        portal_metrics.register(metrics.loop_gauges)
        portal_metrics.register(metrics.fleet_gauges)


def the_settings_cluster(sender: Any, using: str = "default", **kwargs: Any) -> None:
    """After ``migrate`` or ``flush``: the cluster the settings connect to is there."""
    state = kwargs.get("apps") or global_apps
    try:
        clusters = state.get_model("cluster", "Cluster").objects.using(using)
    except LookupError:  # migrated back to before clusters were objects
        return
    settings_cluster_of(clusters)
