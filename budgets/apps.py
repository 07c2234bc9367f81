from django.apps import AppConfig


class BudgetsConfig(AppConfig):
    name = "budgets"
    verbose_name = "Budgets"
    default_auto_field = "django.db.models.BigAutoField"
