"""The observed fleet (nodes, pods, workloads, PodGroups, refused creations) and drift, moved
from fleet: the models as they were, on the same tables (state only)."""

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

    dependencies = [
        ("cluster", "0001_initial"),
        ("fleet", "0009_models_moved_out"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name='Drift',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('kind', models.CharField(choices=[('mig_layout', 'MIG layout'), ('object', 'Managed object'), ('missing', 'Managed object missing')], max_length=16)),
                        ('subject', models.CharField(help_text='Node name, or Kind namespace/name.', max_length=300)),
                        ('field', models.CharField(blank=True, max_length=200)),
                        ('desired', models.TextField(blank=True)),
                        ('observed', models.TextField(blank=True)),
                        ('detail', models.TextField(blank=True)),
                        ('first_seen', models.DateTimeField()),
                        ('last_seen', models.DateTimeField()),
                        ('resolved_at', models.DateTimeField(blank=True, null=True)),
                    ],
                    options={
                        'db_table': 'fleet_drift',
                        'ordering': ['-first_seen'],
                        'constraints': [models.UniqueConstraint(condition=models.Q(('resolved_at__isnull', True)), fields=('kind', 'subject', 'field'), name='one_open_drift_per_field')],
                    },
                ),
                migrations.CreateModel(
                    name='ObservedCreateFailure',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('namespace', models.CharField(max_length=63)),
                        ('kind', models.CharField(max_length=63)),
                        ('name', models.CharField(max_length=253)),
                        ('message', models.TextField()),
                        ('count', models.PositiveIntegerField(default=1)),
                        ('last_seen', models.DateTimeField()),
                    ],
                    options={
                        'db_table': 'fleet_observedcreatefailure',
                        'ordering': ['namespace', 'kind', 'name'],
                        'constraints': [models.UniqueConstraint(fields=('namespace', 'kind', 'name'), name='observed_create_failure_once')],
                    },
                ),
                migrations.CreateModel(
                    name='ObservedNode',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('name', models.CharField(max_length=253, unique=True)),
                        ('uid', models.CharField(blank=True, max_length=64)),
                        ('gpu_product', models.CharField(blank=True, max_length=128)),
                        ('gpu_count', models.PositiveIntegerField(default=0)),
                        ('gpu_memory_mib', models.PositiveIntegerField(default=0)),
                        ('mig_capable', models.BooleanField(default=False)),
                        ('mig_strategy', models.CharField(blank=True, max_length=16)),
                        ('mig_config', models.CharField(blank=True, max_length=63)),
                        ('mig_config_state', models.CharField(blank=True, max_length=16)),
                        ('mig_config_by', models.CharField(blank=True, help_text='Who last set nvidia.com/mig.config (managedFields): manager and time.', max_length=200)),
                        ('pool_label', models.CharField(blank=True, max_length=63)),
                        ('capacity', models.JSONField(default=dict)),
                        ('allocatable', models.JSONField(default=dict)),
                        ('allocated', models.JSONField(default=dict, help_text='GPU resources requested by pods on the node.')),
                        ('labels', models.JSONField(default=dict)),
                        ('taints', models.JSONField(default=list)),
                        ('unschedulable', models.BooleanField(default=False)),
                        ('ready', models.BooleanField(default=False)),
                        ('resource_version', models.CharField(blank=True, max_length=32)),
                        ('row_hash', models.CharField(blank=True, max_length=32)),
                        ('first_seen', models.DateTimeField()),
                        ('last_changed', models.DateTimeField()),
                        ('gone_since', models.DateTimeField(blank=True, null=True)),
                    ],
                    options={
                        'db_table': 'fleet_observednode',
                        'ordering': ['name'],
                        'indexes': [models.Index(fields=['pool_label', 'name'], name='observed_node_pool')],
                    },
                ),
                migrations.CreateModel(
                    name='ObservedPod',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('namespace', models.CharField(max_length=63)),
                        ('name', models.CharField(max_length=253)),
                        ('uid', models.CharField(blank=True, max_length=64)),
                        ('node_name', models.CharField(blank=True, max_length=253)),
                        ('phase', models.CharField(blank=True, max_length=16)),
                        ('gpu_requests', models.JSONField(default=dict)),
                        ('priority', models.IntegerField(default=0)),
                        ('queue_name', models.CharField(blank=True, max_length=63)),
                        ('group_name', models.CharField(blank=True, help_text='Its Volcano PodGroup (a gang), if any.', max_length=253)),
                        ('pending_reason', models.CharField(blank=True, max_length=64)),
                        ('pending_message', models.TextField(blank=True)),
                        ('created_at', models.DateTimeField(blank=True, null=True)),
                        ('row_hash', models.CharField(blank=True, max_length=32)),
                        ('last_changed', models.DateTimeField()),
                    ],
                    options={
                        'db_table': 'fleet_observedpod',
                        'ordering': ['namespace', 'name'],
                        'indexes': [models.Index(fields=['node_name'], name='observed_pod_node')],
                        'constraints': [models.UniqueConstraint(fields=('namespace', 'name'), name='observed_pod_once')],
                    },
                ),
                migrations.CreateModel(
                    name='ObservedPodGroup',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('namespace', models.CharField(max_length=63)),
                        ('name', models.CharField(max_length=253)),
                        ('queue', models.CharField(blank=True, max_length=253)),
                        ('min_member', models.PositiveIntegerField(default=0)),
                        ('min_resources', models.JSONField(default=dict)),
                        ('phase', models.CharField(blank=True, max_length=16)),
                        ('running', models.PositiveIntegerField(default=0)),
                        ('reason', models.CharField(blank=True, max_length=64)),
                        ('message', models.TextField(blank=True)),
                        ('last_changed', models.DateTimeField()),
                    ],
                    options={
                        'db_table': 'fleet_observedpodgroup',
                        'ordering': ['namespace', 'name'],
                        'constraints': [models.UniqueConstraint(fields=('namespace', 'name'), name='observed_podgroup_once')],
                    },
                ),
                migrations.CreateModel(
                    name='ObservedWorkload',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('namespace', models.CharField(max_length=63)),
                        ('name', models.CharField(max_length=253)),
                        ('queue_name', models.CharField(blank=True, max_length=63)),
                        ('cluster_queue', models.CharField(blank=True, max_length=253)),
                        ('admitted', models.BooleanField(default=False)),
                        ('finished', models.BooleanField(default=False)),
                        ('reason', models.CharField(blank=True, max_length=64)),
                        ('message', models.TextField(blank=True)),
                        ('requests', models.JSONField(default=dict)),
                        ('priority', models.IntegerField(default=0)),
                        ('created_at', models.DateTimeField(blank=True, null=True)),
                        ('admitted_at', models.DateTimeField(blank=True, null=True)),
                        ('position', models.IntegerField(blank=True, help_text='0-based place in its ClusterQueue (visibility API).', null=True)),
                        ('position_in_local_queue', models.IntegerField(blank=True, null=True)),
                        ('last_changed', models.DateTimeField()),
                    ],
                    options={
                        'db_table': 'fleet_observedworkload',
                        'ordering': ['namespace', 'name'],
                        'constraints': [models.UniqueConstraint(fields=('namespace', 'name'), name='observed_workload_once')],
                    },
                ),
            ],
        ),
        migrations.RunPython(*move_content_types("fleet", "cluster", ["observednode", "observedpod", "observedworkload", "observedpodgroup", "observedcreatefailure", "drift"])),
        migrations.RunPython(*move_content_types("sync", "cluster", ["appliedobject", "observedobject", "syncrun"])),
    ]
