from django.apps import AppConfig


class CostsConfig(AppConfig):
    name = "costs"
    verbose_name = "Costs"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # lazy: selectors import models, ready only once the app registry is.
        from costs import selectors
        from idle import selectors as idle

        idle.priced_by(selectors.idle_costs)
