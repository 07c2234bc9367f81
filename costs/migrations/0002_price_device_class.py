# A price of one device allocated through a DRA device class.

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("costs", "0001_initial"),
    ]

    operations = [
        migrations.RemoveConstraint(
            model_name="price",
            name="costs_price_once",
        ),
        migrations.AddField(
            model_name="price",
            name="device_class",
            field=models.CharField(
                blank=True,
                help_text="A DRA DeviceClass, e.g. mig.nvidia.com: one device of the model "
                "allocated through it; blank: the device plugin's GPU or MIG profile.",
                max_length=253,
            ),
        ),
        migrations.AlterModelOptions(
            name="price",
            options={"ordering": ["gpu_model", "profile", "device_class", "effective_from"]},
        ),
        migrations.AddConstraint(
            model_name="price",
            constraint=models.UniqueConstraint(
                fields=("gpu_model", "profile", "device_class", "effective_from"),
                name="costs_price_once",
            ),
        ),
    ]
