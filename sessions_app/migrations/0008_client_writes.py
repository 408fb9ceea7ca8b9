import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("sessions_app", "0007_maintenance_attempts"),
    ]

    operations = [
        migrations.CreateModel(
            name="ClientWrite",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("client_message_id", models.CharField(max_length=128)),
                ("request_hash", models.CharField(max_length=64)),
                ("message_index", models.BigIntegerField()),
                ("created_at", models.DateTimeField(auto_now_add=True)),
                (
                    "session",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="client_writes",
                        to="sessions_app.session",
                    ),
                ),
            ],
            options={
                "constraints": [
                    models.UniqueConstraint(
                        fields=("session", "client_message_id"), name="client_write_unique_id"
                    )
                ],
            },
        ),
    ]
