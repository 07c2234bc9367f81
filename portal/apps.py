from django.apps import AppConfig


class PortalConfig(AppConfig):
    name = "portal"
    verbose_name = "Portal"

    def ready(self) -> None:
        # lazy: the system checks register once the app registry is ready.
        from portal import checks  # noqa: F401
