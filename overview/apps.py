from django.apps import AppConfig


class OverviewConfig(AppConfig):
    name = "overview"
    verbose_name = "Overview pages"
