"""Run timelines: the model call's latency and the dispatch's duration, and host-driven turns.

Both new columns are nullable: turns and receipts written before they were measured say
"not recorded". The backfill counts the turns of host-driven runs, which were left at 0
because only the built-in runtime counted its turns: a turn is a model answer, i.e. an
assistant message that does not follow an assistant message of the same run. Only hot
messages are read (archived ones are compressed ranges long before the run's last answer,
and a migration should not unpack the archive); its rule is frozen here, not imported.
"""

from django.db import migrations, models
from django.db.models import Count, Exists, OuterRef

BATCH = 500


def count_host_turns(apps, schema_editor):
    Run = apps.get_model("sessions_app", "Run")
    Message = apps.get_model("sessions_app", "Message")
    runs = Run.objects.filter(turns=0, session__agent_version__model_provider="external")
    ids = list(runs.values_list("id", flat=True))
    for start in range(0, len(ids), BATCH):
        batch = ids[start : start + BATCH]
        continued = Message.objects.filter(
            session_id=OuterRef("session_id"),
            index=OuterRef("index") - 1,
            role="assistant",
            run_id=OuterRef("run_id"),
        )
        counted = (
            Message.objects.filter(run_id__in=batch, role="assistant")
            .exclude(Exists(continued))
            .values("run_id")
            .annotate(n=Count("id"))
            .order_by()
        )
        for row in counted:
            Run.objects.filter(pk=row["run_id"]).update(turns=row["n"])


class Migration(migrations.Migration):
    dependencies = [
        ("sessions_app", "0012_snapshot_build_inputs"),
    ]

    operations = [
        migrations.AddField(
            model_name="projectionsnapshot",
            name="model_latency_ms",
            field=models.PositiveIntegerField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="toolreceipt",
            name="duration_ms",
            field=models.PositiveIntegerField(blank=True, null=True),
        ),
        migrations.RunPython(count_host_turns, migrations.RunPython.noop),
    ]
