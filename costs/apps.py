from django.apps import AppConfig


class CostsConfig(AppConfig):
    name = "costs"
    verbose_name = "Costs"
    default_auto_field = "django.db.models.BigAutoField"
