"""The loop's records of what it applied and of each poll, as the former ``sync`` app created
them (its migrations are replaced: an installation that ran them runs nothing here)."""

from django.db import migrations, models


class Migration(migrations.Migration):

    initial = True
    replaces = [("sync", "0001_initial"), ("sync", "0002_who_changed")]

    dependencies = [
    ]

    operations = [
        migrations.CreateModel(
            name='SyncRun',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('started_at', models.DateTimeField()),
                ('finished_at', models.DateTimeField(blank=True, null=True)),
                ('duration_ms', models.PositiveIntegerField(blank=True, null=True)),
                ('nodes', models.PositiveIntegerField(default=0)),
                ('pods', models.PositiveIntegerField(default=0)),
                ('changed', models.PositiveIntegerField(default=0)),
                ('error', models.TextField(blank=True)),
            ],
            options={
                'db_table': 'sync_syncrun',
                'ordering': ['-started_at'],
            },
        ),
        migrations.CreateModel(
            name='AppliedObject',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('api_version', models.CharField(max_length=100)),
                ('kind', models.CharField(max_length=63)),
                ('namespace', models.CharField(blank=True, max_length=63)),
                ('name', models.CharField(max_length=253)),
                ('content_hash', models.CharField(blank=True, max_length=64)),
                ('outcome', models.CharField(choices=[('pending', 'Pending'), ('applied', 'Applied'), ('conflict', 'Conflict (owned by another manager)'), ('failed', 'Failed (refused by the cluster)'), ('retrying', 'Retrying (cluster unreachable)')], default='pending', max_length=16)),
                ('message', models.TextField(blank=True)),
                ('attempts', models.PositiveIntegerField(default=0)),
                ('last_attempt_at', models.DateTimeField(blank=True, null=True)),
                ('applied_at', models.DateTimeField(blank=True, null=True)),
                ('resource_version', models.CharField(blank=True, max_length=32)),
                ('adopted', models.BooleanField(default=False, help_text='It existed before the portal applied it: on removal the portal only gives up its fields and never deletes it.')),
            ],
            options={
                'db_table': 'sync_appliedobject',
                'ordering': ['kind', 'namespace', 'name'],
                'constraints': [models.UniqueConstraint(fields=('kind', 'namespace', 'name'), name='applied_object_once')],
            },
        ),
        migrations.CreateModel(
            name='ObservedObject',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('api_version', models.CharField(max_length=100)),
                ('kind', models.CharField(max_length=63)),
                ('namespace', models.CharField(blank=True, max_length=63)),
                ('name', models.CharField(max_length=253)),
                ('spec', models.JSONField(default=dict)),
                ('status', models.JSONField(default=dict)),
                ('resource_version', models.CharField(blank=True, max_length=32)),
                ('changed_by', models.JSONField(default=list, help_text='Other writers from managedFields: manager, operation, time.')),
                ('last_seen', models.DateTimeField()),
            ],
            options={
                'db_table': 'sync_observedobject',
                'ordering': ['kind', 'namespace', 'name'],
                'constraints': [models.UniqueConstraint(fields=('kind', 'namespace', 'name'), name='observed_object_once')],
            },
        ),
    ]
