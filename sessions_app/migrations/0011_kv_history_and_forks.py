"""KV history (contract §10): every committed KV change kept at its revision; forks of sessions.

KVHistory rows are appended by a trigger on KVEntry (INSERT and UPDATE, so the upsert of
kv_apply_locked records each key it writes in the same statement). Existing sessions are
seeded with their current KV at the entries' revisions; `kv_history_from` is set to their
revision now, below which their state is unknown (docs/decisions.md). Messages written
before this migration keep `written_at_revision` null.
"""

import django.db.models.deletion
from django.db import migrations, models

SEED = """
INSERT INTO sessions_app_kvhistory (session_id, key, revision, value, deleted)
SELECT session_id, key, revision, value, {false} FROM sessions_app_kventry
"""
BASELINE = "UPDATE sessions_app_session SET kv_history_from = state_revision"

POSTGRES_TRIGGER = """
CREATE OR REPLACE FUNCTION sessions_app_kventry_history() RETURNS trigger AS $$
BEGIN
    INSERT INTO sessions_app_kvhistory (session_id, key, revision, value, deleted)
    VALUES (NEW.session_id, NEW.key, NEW.revision, NEW.value, FALSE);
    RETURN NULL;
END;
$$ LANGUAGE plpgsql;

CREATE TRIGGER sessions_app_kventry_history
    AFTER INSERT OR UPDATE ON sessions_app_kventry
    FOR EACH ROW EXECUTE FUNCTION sessions_app_kventry_history();
"""
POSTGRES_DROP = """
DROP TRIGGER IF EXISTS sessions_app_kventry_history ON sessions_app_kventry;
DROP FUNCTION IF EXISTS sessions_app_kventry_history();
"""
# SQLite: one trigger per event; an upsert's DO UPDATE fires the UPDATE trigger.
SQLITE_TRIGGERS = [
    f"""
CREATE TRIGGER sessions_app_kventry_history_{event.lower()}
AFTER {event} ON sessions_app_kventry
BEGIN
    INSERT INTO sessions_app_kvhistory (session_id, key, revision, value, deleted)
    VALUES (NEW.session_id, NEW.key, NEW.revision, NEW.value, 0);
END
"""
    for event in ("INSERT", "UPDATE")
]
SQLITE_DROP = [
    f"DROP TRIGGER IF EXISTS sessions_app_kventry_history_{event}" for event in ("insert", "update")
]


def forwards(apps, schema_editor):
    postgres = schema_editor.connection.vendor == "postgresql"
    schema_editor.execute(SEED.format(false="FALSE" if postgres else "0"), params=None)
    schema_editor.execute(BASELINE, params=None)
    if postgres:
        schema_editor.execute(POSTGRES_TRIGGER, params=None)
    else:
        for statement in SQLITE_TRIGGERS:
            schema_editor.execute(statement, params=None)


def backwards(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(POSTGRES_DROP, params=None)
    else:
        for statement in SQLITE_DROP:
            schema_editor.execute(statement, params=None)


class Migration(migrations.Migration):
    dependencies = [
        ("sessions_app", "0010_snapshot_usage_columns"),
    ]

    operations = [
        migrations.AddField(
            model_name="message",
            name="forked_from_message_id",
            field=models.UUIDField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="message",
            name="written_at_revision",
            field=models.BigIntegerField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="run",
            name="forked_from_run_id",
            field=models.UUIDField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="session",
            name="forked_from",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="forks",
                to="sessions_app.session",
            ),
        ),
        migrations.AddField(
            model_name="session",
            name="forked_revision",
            field=models.BigIntegerField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="session",
            name="forked_through_index",
            field=models.BigIntegerField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="session",
            name="kv_history_from",
            field=models.BigIntegerField(db_default=0, default=0),
        ),
        migrations.CreateModel(
            name="KVHistory",
            fields=[
                (
                    "pk",
                    models.CompositePrimaryKey(
                        "session",
                        "key",
                        "revision",
                        blank=True,
                        editable=False,
                        primary_key=True,
                        serialize=False,
                    ),
                ),
                ("key", models.CharField(max_length=200)),
                ("revision", models.BigIntegerField()),
                ("value", models.JSONField(blank=True, null=True)),
                ("deleted", models.BooleanField(db_default=False, default=False)),
                (
                    "session",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="kv_history",
                        to="sessions_app.session",
                    ),
                ),
            ],
            options={
                "verbose_name": "KV history row",
                "verbose_name_plural": "KV history",
            },
        ),
        migrations.RunPython(forwards, backwards),
    ]
