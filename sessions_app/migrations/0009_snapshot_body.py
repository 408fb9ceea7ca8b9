"""Snapshots keep their view, sources and request in one compressed `body` (issue #13)."""

from django.db import migrations

import sessions_app.models

BATCH = 500


def fill_body(apps, schema_editor):
    snapshots = apps.get_model("sessions_app", "ProjectionSnapshot")
    rows = snapshots.objects.only("id", "messages", "sources", "request").order_by("pk")
    batch = []
    for row in rows.iterator(chunk_size=BATCH):
        row.body = {"messages": row.messages, "sources": row.sources, "request": row.request}
        batch.append(row)
        if len(batch) >= BATCH:
            snapshots.objects.bulk_update(batch, ["body"])
            batch = []
    if batch:
        snapshots.objects.bulk_update(batch, ["body"])


def store_uncompressed(apps, schema_editor):
    # The body is compressed already: PostgreSQL would only try (and fail) to compress it again.
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(
            "ALTER TABLE sessions_app_projectionsnapshot ALTER COLUMN body SET STORAGE EXTERNAL"
        )


class Migration(migrations.Migration):
    dependencies = [("sessions_app", "0008_client_writes")]

    operations = [
        migrations.AddField(
            model_name="projectionsnapshot",
            name="body",
            field=sessions_app.models.CompressedJSONField(default=dict),
        ),
        migrations.RunPython(fill_body, migrations.RunPython.noop),
        migrations.RunPython(store_uncompressed, migrations.RunPython.noop),
        migrations.RemoveField(model_name="projectionsnapshot", name="messages"),
        migrations.RemoveField(model_name="projectionsnapshot", name="sources"),
        migrations.RemoveField(model_name="projectionsnapshot", name="request"),
    ]
