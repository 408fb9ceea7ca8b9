"""Snapshots record what their view depended on outside the state, the log and the version.

Additive: older snapshots keep null, and a replay says what it assumed for them
(docs/decisions.md "Replay").
"""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("sessions_app", "0011_kv_history_and_forks"),
    ]

    operations = [
        migrations.AddField(
            model_name="projectionsnapshot",
            name="build_inputs",
            field=models.JSONField(blank=True, null=True),
        ),
    ]
