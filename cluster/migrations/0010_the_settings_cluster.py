"""An installation from before clusters were objects becomes one cluster: named from
QM_CLUSTER_NAME (default ``default``) and connected as the settings say (KUBE_URL /
KUBECONFIG / KUBE_IN_CLUSTER), so its loop keeps working exactly as it did. Nothing else
changes; going back removes only that row."""

from django.conf import settings
from django.db import migrations


def make_the_settings_cluster(apps, schema_editor):
    clusters = apps.get_model("cluster", "Cluster").objects.using(schema_editor.connection.alias)
    if clusters.filter(connection="settings").exists():
        return
    name = settings.QM_CLUSTER_NAME
    clusters.create(
        name=name,
        display_name=name.replace("-", " ").capitalize(),
        purpose="general",
        connection="settings",
    )


def remove_the_settings_cluster(apps, schema_editor):
    clusters = apps.get_model("cluster", "Cluster").objects.using(schema_editor.connection.alias)
    clusters.filter(connection="settings").delete()


class Migration(migrations.Migration):
    dependencies = [("cluster", "0009_cluster")]

    operations = [
        migrations.RunPython(make_the_settings_cluster, remove_the_settings_cluster),
    ]
