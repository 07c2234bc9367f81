from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("cluster", "0016_dra_observed"),
    ]

    operations = [
        migrations.AddField(
            model_name="observedworkload",
            name="conditions",
            field=models.JSONField(
                blank=True,
                default=list,
                help_text="Kueue's conditions (type, status, reason, message, "
                "lastTransitionTime): one per type, the latest transition of each, as the "
                "workload's story is told.",
            ),
        ),
        migrations.AddIndex(
            model_name="observedworkload",
            index=models.Index(
                models.OrderBy(models.F("created_at"), descending=True, nulls_last=True),
                models.OrderBy(models.F("id"), descending=True),
                include=("cluster_id",),
                name="observed_workload_newest",
            ),
        ),
    ]
