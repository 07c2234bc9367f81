"""The observed fleet moved to cluster, MIG changes to changes, GPU health to health: state
only, the tables stay as they are (their apps name them with ``db_table``)."""

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('fleet', '0008_queue_positions'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.DeleteModel(
                    name='Drift',
                ),
                migrations.RemoveField(
                    model_name='migchangerequest',
                    name='decided_by',
                ),
                migrations.RemoveField(
                    model_name='migchangerequest',
                    name='pool',
                ),
                migrations.RemoveField(
                    model_name='migchangerequest',
                    name='requested_by',
                ),
                migrations.RemoveField(
                    model_name='migchangerequest',
                    name='team',
                ),
                migrations.RemoveField(
                    model_name='migchangestep',
                    name='request',
                ),
                migrations.DeleteModel(
                    name='NodeHealth',
                ),
                migrations.DeleteModel(
                    name='ObservedCreateFailure',
                ),
                migrations.DeleteModel(
                    name='ObservedNode',
                ),
                migrations.DeleteModel(
                    name='ObservedPod',
                ),
                migrations.DeleteModel(
                    name='ObservedPodGroup',
                ),
                migrations.DeleteModel(
                    name='ObservedWorkload',
                ),
                migrations.DeleteModel(
                    name='MigChangeRequest',
                ),
                migrations.DeleteModel(
                    name='MigChangeStep',
                ),
            ],
        ),
    ]
