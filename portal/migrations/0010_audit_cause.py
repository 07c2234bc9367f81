from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("portal", "0009_notifications")]

    operations = [
        migrations.AddField(
            model_name="auditevent",
            name="cause",
            field=models.CharField(
                blank=True,
                help_text=(
                    "The reviewed request this change carries out (app_label.model:id), if any."
                ),
                max_length=96,
            ),
        ),
    ]
