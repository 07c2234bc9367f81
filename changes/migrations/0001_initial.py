"""MIG changes, drains and quota requests, in their own app: the models as they were in fleet
and tenants, on the same tables (state only)."""

import django.db.models.deletion
from django.conf import settings
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
        ('contenttypes', '0002_remove_content_type_name'),
        ('fleet', '0009_models_moved_out'),
        ('queues', '0001_initial'),
        ('tenants', '0004_requests_moved_to_changes'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name='AutoApprovalRule',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('name', models.CharField(max_length=100, unique=True)),
                        ('kind', models.CharField(choices=[('namespace', 'Namespace quota'), ('queue', 'ClusterQueue nominal quota')], max_length=16)),
                        ('resource', models.CharField(help_text='e.g. requests.nvidia.com/gpu or nvidia.com/gpu', max_length=253)),
                        ('max_increase', models.PositiveIntegerField(help_text='Largest increase the rule grants.')),
                        ('max_days', models.PositiveIntegerField(help_text='Grants must end within this many days.')),
                        ('requires_capacity', models.BooleanField(default=True, help_text='Only when the fleet can back it.')),
                        ('active', models.BooleanField(default=True)),
                    ],
                    options={
                        'db_table': 'tenants_autoapprovalrule',
                        'ordering': ['name'],
                    },
                ),
                migrations.CreateModel(
                    name='MigChangeRequest',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('kind', models.CharField(choices=[('mig', 'MIG change'), ('drain', 'Cordon and drain')], default='mig', max_length=8)),
                        ('nodes', models.JSONField(default=list, help_text='Node names the change applies to.')),
                        ('target_config', models.CharField(blank=True, max_length=63)),
                        ('suggestion_key', models.CharField(blank=True, db_index=True, help_text='What made the portal suggest it (node, GPU, UUID, Xid): never suggested twice.', max_length=200)),
                        ('reason', models.TextField()),
                        ('window_start', models.DateTimeField(blank=True, null=True)),
                        ('state', models.CharField(choices=[('pending', 'Pending approval'), ('approved', 'Approved'), ('rejected', 'Rejected'), ('cancelled', 'Cancelled'), ('scheduled', 'Scheduled'), ('running', 'Running'), ('succeeded', 'Succeeded'), ('failed', 'Failed'), ('rolling_back', 'Rolling back'), ('rolled_back', 'Rolled back')], default='pending', max_length=16)),
                        ('assessment', models.JSONField(default=dict)),
                        ('verdict', models.CharField(blank=True, max_length=16)),
                        ('previous_configs', models.JSONField(default=dict, help_text='Node -> MIG config before.')),
                        ('queue_changes', models.JSONField(default=list, help_text='ClusterQueue nominal quota changes applied after verification.')),
                        ('decision_comment', models.TextField(blank=True)),
                        ('decided_at', models.DateTimeField(blank=True, null=True)),
                        ('failure', models.TextField(blank=True)),
                        ('created_at', models.DateTimeField(auto_now_add=True)),
                        ('updated_at', models.DateTimeField(auto_now=True)),
                        ('decided_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='mig_changes_decided', to=settings.AUTH_USER_MODEL)),
                        ('pool', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, to='fleet.nodepool')),
                        ('requested_by', models.ForeignKey(blank=True, help_text='Empty when the portal suggested it (a GPU health finding).', null=True, on_delete=django.db.models.deletion.PROTECT, related_name='mig_changes_requested', to=settings.AUTH_USER_MODEL)),
                        ('team', models.ForeignKey(blank=True, help_text='The asking team; empty for a drain the portal suggested.', null=True, on_delete=django.db.models.deletion.PROTECT, related_name='mig_changes', to='tenants.team')),
                    ],
                    options={
                        'db_table': 'fleet_migchangerequest',
                        'ordering': ['-created_at'],
                    },
                ),
                migrations.CreateModel(
                    name='MigChangeStep',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('round', models.CharField(default='apply', help_text='apply or rollback', max_length=8)),
                        ('node', models.CharField(blank=True, max_length=253)),
                        ('step', models.CharField(max_length=16)),
                        ('status', models.CharField(choices=[('running', 'Running'), ('done', 'Done'), ('failed', 'Failed')], default='running', max_length=8)),
                        ('message', models.TextField(blank=True)),
                        ('started_at', models.DateTimeField()),
                        ('finished_at', models.DateTimeField(blank=True, null=True)),
                        ('request', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='steps', to='changes.migchangerequest')),
                    ],
                    options={
                        'db_table': 'fleet_migchangestep',
                        'ordering': ['started_at', 'id'],
                    },
                ),
                migrations.CreateModel(
                    name='QuotaChangeRequest',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('kind', models.CharField(choices=[('namespace', 'Namespace quota'), ('queue', 'ClusterQueue nominal quota')], max_length=16)),
                        ('flavor', models.CharField(blank=True, max_length=253)),
                        ('resource', models.CharField(max_length=253)),
                        ('previous', models.CharField(blank=True, max_length=64)),
                        ('requested', models.CharField(max_length=64)),
                        ('reason', models.TextField()),
                        ('grant_until', models.DateTimeField(blank=True, help_text='Empty: permanent.', null=True)),
                        ('state', models.CharField(choices=[('pending', 'Pending approval'), ('approved', 'Approved and applied'), ('rejected', 'Rejected'), ('cancelled', 'Cancelled'), ('expired', 'Expired (reverted)')], default='pending', max_length=16)),
                        ('assessment', models.JSONField(default=dict)),
                        ('decision_comment', models.TextField(blank=True)),
                        ('decided_at', models.DateTimeField(blank=True, null=True)),
                        ('warned_at', models.DateTimeField(blank=True, null=True)),
                        ('reverted_at', models.DateTimeField(blank=True, null=True)),
                        ('created_at', models.DateTimeField(auto_now_add=True)),
                        ('auto_rule', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, to='changes.autoapprovalrule')),
                        ('cluster_queue', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE, to='queues.clusterqueue')),
                        ('decided_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='+', to=settings.AUTH_USER_MODEL)),
                        ('namespace', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE, to='tenants.namespace')),
                        ('requested_by', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='+', to=settings.AUTH_USER_MODEL)),
                        ('team', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='quota_requests', to='tenants.team')),
                    ],
                    options={
                        'db_table': 'tenants_quotachangerequest',
                        'ordering': ['-created_at'],
                    },
                ),
                migrations.AddIndex(
                    model_name='migchangerequest',
                    index=models.Index(fields=['state', 'created_at'], name='mig_change_state'),
                ),
                migrations.AddConstraint(
                    model_name='migchangestep',
                    constraint=models.UniqueConstraint(fields=('request', 'round', 'node', 'step'), name='one_step_record'),
                ),
            ],
        ),
        migrations.RunPython(*move_content_types('fleet', 'changes', ['migchangerequest', 'migchangestep'])),
        migrations.RunPython(*move_content_types('tenants', 'changes', ['autoapprovalrule', 'quotachangerequest'])),
    ]
