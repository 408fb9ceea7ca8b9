"""Indexes for the operator console (issue 27): the dashboard's aggregates and search.

Every dashboard filter is a range on one of these (runs started lately, runs in progress,
failed runs and error receipts of the last hour, today's reported turns); search pages
sessions newest first and finds the views that could show a message. On PostgreSQL, a GIN
index on the words of a message's content and tool-call arguments serves the text search
within a session (sessions_app.reads.search.MESSAGE_TSVECTOR must match it exactly);
SQLite scans instead.
"""

from django.db import migrations, models

# The expression of sessions_app.reads.search.MESSAGE_TSVECTOR, character for character,
# so the planner can use the index.
CREATE_FTS = """
CREATE INDEX IF NOT EXISTS message_text_search ON sessions_app_message USING gin ((
    jsonb_to_tsvector('simple'::regconfig, content, '["string"]'::jsonb)
    || jsonb_to_tsvector('simple'::regconfig, coalesce(arguments, '{}'::jsonb), '["string"]'::jsonb)
))
"""
DROP_FTS = "DROP INDEX IF EXISTS message_text_search"


def fts_forwards(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(CREATE_FTS, params=None)


def fts_backwards(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(DROP_FTS, params=None)


class Migration(migrations.Migration):
    dependencies = [
        ("agents", "0003_tool_created_at"),
        ("sessions_app", "0013_turn_timings_and_host_turns"),
    ]

    operations = [
        migrations.AddIndex(
            model_name="projectionsnapshot",
            index=models.Index(
                condition=models.Q(("input_tokens__isnull", False)),
                fields=["created_at"],
                name="snapshot_reported_created",
            ),
        ),
        migrations.AddIndex(
            model_name="projectionsnapshot",
            index=models.Index(
                fields=["session", "window_id", "upper_bound"], name="snapshot_window_bound"
            ),
        ),
        migrations.AddIndex(
            model_name="run",
            index=models.Index(fields=["created_at", "status"], name="run_created"),
        ),
        migrations.AddIndex(
            model_name="run",
            index=models.Index(
                condition=models.Q(("status__in", ["queued", "running", "waiting_for_host_tool"])),
                fields=["status"],
                name="run_in_progress",
            ),
        ),
        migrations.AddIndex(
            model_name="run",
            index=models.Index(
                condition=models.Q(("status", "failed")),
                fields=["finished_at"],
                name="run_failed_finished",
            ),
        ),
        migrations.AddIndex(
            model_name="session",
            index=models.Index(fields=["-created_at", "-id"], name="session_created"),
        ),
        migrations.AddIndex(
            model_name="toolreceipt",
            index=models.Index(
                condition=models.Q(("success", False)),
                fields=["created_at"],
                name="receipt_failed_created",
            ),
        ),
        migrations.RunPython(fts_forwards, fts_backwards),
    ]
