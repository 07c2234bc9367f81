from django.apps import AppConfig


class DiagnosticsConfig(AppConfig):
    name = "diagnostics"
    verbose_name = "Diagnostics"

    def ready(self) -> None:
        # lazy: the explainer imports models, which load only once the app registry is ready.
        from diagnostics import explainer
        from loop import written

        # The loop sits below diagnostics and never imports it: after it writes a cluster's
        # observed rows, the explainer explains what waits there, in the poll's transaction.
        written.subscribe(explainer.explain_cluster)
