from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("cluster", "0017_workload_conditions"),
    ]

    operations = [
        migrations.AddField(
            model_name="observedpod",
            name="resource_claims",
            field=models.JSONField(
                blank=True,
                default=list,
                help_text="Its DRA claims (spec.resourceClaims): name, claim (the ResourceClaim "
                "it uses, named or made from its template; empty until made), template.",
            ),
        ),
    ]
