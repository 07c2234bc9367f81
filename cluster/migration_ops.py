"""Migration operations shared by the apps: attaching existing rows to the settings' cluster.

A cluster foreign key is added in three steps, so that a migration never calls the field's
default (which reads the default database, not necessarily the one being migrated): the
column, nullable; every row set to the settings' cluster of the database being migrated (made
when missing); then NOT NULL, with the model's default in the migration state only.
"""

from __future__ import annotations

from typing import Any

from django.db import migrations, models

from cluster.scope import settings_cluster_id, settings_cluster_of

HELP = "The Kubernetes cluster this belongs to."


def cluster_key_added(app_label: str, model_name: str, table: str, related_name: str) -> list[Any]:
    """The operations that add ``cluster`` to the model (its table named ``table``)."""

    def key(**options: Any) -> Any:
        return models.ForeignKey(
            "cluster.cluster",
            on_delete=models.PROTECT,
            related_name=related_name,
            help_text=HELP,
            **options,
        )

    def fill(apps: Any, schema_editor: Any) -> None:
        alias = schema_editor.connection.alias
        cluster = settings_cluster_of(apps.get_model("cluster", "Cluster").objects.using(alias))
        rows = apps.get_model(app_label, model_name).objects.using(alias)
        rows.filter(cluster__isnull=True).update(cluster=cluster.pk)
        # The updated rows' deferred foreign-key checks run now, so that the ALTER TABLE
        # below (same table, same transaction) finds no pending trigger events.
        schema_editor.execute("SET CONSTRAINTS ALL IMMEDIATE")
        schema_editor.execute("SET CONSTRAINTS ALL DEFERRED")

    column = f'ALTER TABLE "{table}" ALTER COLUMN cluster_id'
    return [
        migrations.AddField(model_name=model_name, name="cluster", field=key(null=True)),
        migrations.RunPython(fill, migrations.RunPython.noop),
        migrations.SeparateDatabaseAndState(
            database_operations=[
                migrations.RunSQL(f"{column} SET NOT NULL", f"{column} DROP NOT NULL")
            ],
            state_operations=[
                migrations.AlterField(
                    model_name=model_name,
                    name="cluster",
                    field=key(default=settings_cluster_id),
                )
            ],
        ),
    ]
