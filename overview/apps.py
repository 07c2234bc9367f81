from django.apps import AppConfig


class OverviewConfig(AppConfig):
    name = "overview"
    verbose_name = "Overview pages"

    def ready(self) -> None:
        # lazy: models import only once the app registry is ready.
        from cluster.selectors import sends_first
        from overview.workspace import counts_first

        sends_first(counts_first)
