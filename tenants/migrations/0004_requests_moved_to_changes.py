"""Quota requests and auto-approval rules moved to changes: state only, the tables stay."""

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('tenants', '0003_sso_grants'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.RemoveField(
                    model_name='quotachangerequest',
                    name='auto_rule',
                ),
                migrations.RemoveField(
                    model_name='quotachangerequest',
                    name='cluster_queue',
                ),
                migrations.RemoveField(
                    model_name='quotachangerequest',
                    name='decided_by',
                ),
                migrations.RemoveField(
                    model_name='quotachangerequest',
                    name='namespace',
                ),
                migrations.RemoveField(
                    model_name='quotachangerequest',
                    name='requested_by',
                ),
                migrations.RemoveField(
                    model_name='quotachangerequest',
                    name='team',
                ),
                migrations.DeleteModel(
                    name='AutoApprovalRule',
                ),
                migrations.DeleteModel(
                    name='QuotaChangeRequest',
                ),
            ],
        ),
    ]
