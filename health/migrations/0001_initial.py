"""GPU health in its own app: the model as it was in fleet, on the same table (state only)."""

from django.db import migrations, models


def move_content_types(old_app, new_app, models):
    """Content types (and so permissions and admin history) follow the models."""

    def forward(apps, schema_editor):
        content_type = apps.get_model("contenttypes", "ContentType")
        db = schema_editor.connection.alias
        for model in models:
            if not content_type.objects.using(db).filter(app_label=new_app, model=model).exists():
                content_type.objects.using(db).filter(app_label=old_app, model=model).update(
                    app_label=new_app
                )

    def backward(apps, schema_editor):
        move_content_types(new_app, old_app, models)[0](apps, schema_editor)

    return forward, backward


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        ('fleet', '0009_models_moved_out'),
        ('contenttypes', '0002_remove_content_type_name'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name='NodeHealth',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('node', models.CharField(max_length=253, unique=True)),
                        ('observed_at', models.DateTimeField()),
                        ('error', models.TextField(blank=True, help_text='Why the exporter could not be read.')),
                        ('gpus', models.JSONField(default=list)),
                        ('findings', models.JSONField(default=list, help_text='What needs attention, worst first.')),
                        ('worst', models.CharField(db_index=True, default='ok', help_text='ok, info, warning or critical', max_length=8)),
                    ],
                    options={
                        'db_table': 'fleet_nodehealth',
                        'ordering': ['node'],
                    },
                ),
            ],
        ),
        migrations.RunPython(*move_content_types('fleet', 'health', ['nodehealth'])),
    ]
