"""PostgreSQL trigger: raw messages refuse UPDATE always and DELETE outside the archive move.

The archive move sets `SET LOCAL contextproto.allow_message_delete = 'on'` in its own
transaction (sessions_app.services.archive). SQLite has no such trigger; the ORM guard in
sessions_app.models covers it there.
"""

from django.db import migrations

CREATE = """
CREATE OR REPLACE FUNCTION sessions_app_message_immutable() RETURNS trigger AS $$
BEGIN
    IF TG_OP = 'DELETE'
       AND current_setting('contextproto.allow_message_delete', true) = 'on' THEN
        RETURN OLD;
    END IF;
    RAISE EXCEPTION 'sessions_app_message rows are immutable: % refused', TG_OP
        USING ERRCODE = 'integrity_constraint_violation';
END;
$$ LANGUAGE plpgsql;

CREATE TRIGGER sessions_app_message_immutable
    BEFORE UPDATE OR DELETE ON sessions_app_message
    FOR EACH ROW EXECUTE FUNCTION sessions_app_message_immutable();
"""

DROP = """
DROP TRIGGER IF EXISTS sessions_app_message_immutable ON sessions_app_message;
DROP FUNCTION IF EXISTS sessions_app_message_immutable();
"""


def forwards(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(CREATE, params=None)


def backwards(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(DROP, params=None)


class Migration(migrations.Migration):
    dependencies = [("sessions_app", "0001_initial")]

    operations = [migrations.RunPython(forwards, backwards)]
