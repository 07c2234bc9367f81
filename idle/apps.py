from django.apps import AppConfig


class IdleConfig(AppConfig):
    name = "idle"
    verbose_name = "Idle GPUs"

    def ready(self) -> None:
        # lazy: models import only once the app registry is ready.
        from health import services as health
        from idle import services

        health.readings_stored(services.record_readings)
