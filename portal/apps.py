from django.apps import AppConfig
from django.db.backends.signals import connection_created


class PortalConfig(AppConfig):
    name = "portal"
    verbose_name = "Portal"

    def ready(self) -> None:
        # lazy: the system checks register once the app registry is ready.
        from portal import checks  # noqa: F401
        from portal.infra.timestamps import use_fast_timestamps

        connection_created.connect(use_fast_timestamps, dispatch_uid="portal.fast_timestamps")
