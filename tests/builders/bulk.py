"""Big data inserted directly, for query-count tests and benchmarks: no service runs per row.

Raw inserts of finished messages are allowed (the log refuses only updates and deletes).
`bulk_console_data` is also what bench/bench_console.py builds its 100k sessions with
(PostgreSQL); `created_at` is set afterwards per time bucket, since auto_now_add fields
ignore a value given at insert.
"""

from __future__ import annotations

import hashlib
import random
import uuid
from collections import defaultdict
from datetime import datetime, timedelta
from decimal import Decimal

from django.db import connection, transaction
from django.utils import timezone

from sessions_app.models import (
    MaintenanceJob,
    Message,
    ProjectionSnapshot,
    Run,
    Session,
    ToolReceipt,
)

RUN_STATUSES = (
    "completed",
    "completed",
    "running",
    "waiting_for_host_tool",
    "failed",
    "queued",
    "max_turns_reached",
    "external",
)
JOB_STATUSES = ("committed", "queued", "failed", "rejected", "running")
DAYS = 30


def bulk_messages(session, count: int, windows: tuple[str, ...] = ("main", "w1", "w2")) -> None:
    """Append `count` finished assistant texts round-robin over `windows` (raw inserts)."""
    start = Session.objects.get(pk=session.pk).next_message_index
    now = timezone.now()
    rows = [
        Message(
            id=uuid.uuid4(),
            session_id=session.pk,
            index=start + n,
            window_id=windows[n % len(windows)],
            role="assistant",
            kind="text",
            content=f"note {start + n}",
            created_at=now,
        )
        for n in range(count)
    ]
    Message.objects.bulk_create(rows, batch_size=2000)
    Session.objects.filter(pk=session.pk).update(next_message_index=start + count)
    session.refresh_from_db()


def sql_bulk_messages(session, count: int, windows: tuple[str, ...] = ("w1", "w2", "w3")) -> None:
    """Append `count` short assistant texts round-robin over `windows`, generated in SQL.

    For sessions of 100k messages: building that many model instances in Python takes tens
    of seconds, one INSERT … SELECT over a generated series takes about one. Raw inserts of
    finished messages are allowed (the log refuses only updates and deletes).
    """
    start = Session.objects.get(pk=session.pk).next_message_index
    last = start + count - 1
    table = Message._meta.db_table
    names = list(windows)
    now = connection.ops.adapt_datetimefield_value(timezone.now())
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                f"""INSERT INTO {table}
                    (id, session_id, "index", window_id, role, kind, content, created_at)
                SELECT gen_random_uuid(), %s, g, (%s::text[])[1 + (g - %s) %% %s],
                    'assistant', 'text', to_jsonb('note ' || g), %s
                FROM generate_series(%s::bigint, %s::bigint) AS g""",
                [session.pk, names, start, len(names), now, start, last],
            )
        else:
            choose = " ".join(f"WHEN {n} THEN '{w}'" for n, w in enumerate(names))
            cursor.execute(
                f"""WITH RECURSIVE seq(g) AS (
                    SELECT %s UNION ALL SELECT g + 1 FROM seq WHERE g < %s)
                INSERT INTO {table}
                    (id, session_id, "index", window_id, role, kind, content, created_at)
                SELECT lower(hex(randomblob(16))), %s, g,
                    CASE (g - %s) %% {len(names)} {choose} END,
                    'assistant', 'text', json_quote('note ' || g), %s
                FROM seq""",
                [start, last, session.pk.hex, start, now],
            )
    Session.objects.filter(pk=session.pk).update(next_message_index=last + 1)
    session.refresh_from_db()


@transaction.atomic
def bulk_history(session: Session, *, total: int, windows: int = 50, seed: int = 7) -> None:
    """Append `total` finished messages spread over `windows` windows (plus `main`).

    Writes host tool call/result pairs and assistant texts directly with bulk_create (raw
    inserts are allowed; only updates and deletes of messages are refused).
    """
    rng = random.Random(seed)
    session = Session.objects.select_for_update(no_key=True).get(pk=session.pk)
    start = session.next_message_index
    now = timezone.now()
    rows: list[Message] = []
    index = start
    window_names = ["main"] + [f"w{n:02d}" for n in range(windows - 1)]
    while index < start + total:
        window = rng.choice(window_names)
        if rng.random() < 0.5 and index + 1 < start + total:
            call_id = f"bulk_{index}"
            rows.append(
                Message(
                    id=uuid.uuid4(),
                    session=session,
                    index=index,
                    window_id=window,
                    role="assistant",
                    kind="tool_call",
                    content="",
                    tool_call_id=call_id,
                    tool_name="lookup",
                    arguments={"q": index},
                    created_at=now,
                )
            )
            rows.append(
                Message(
                    id=uuid.uuid4(),
                    session=session,
                    index=index + 1,
                    window_id=window,
                    role="tool",
                    kind="tool_result",
                    content=f"result {index}",
                    tool_call_id=call_id,
                    is_error=False,
                    created_at=now,
                )
            )
            index += 2
        else:
            rows.append(
                Message(
                    id=uuid.uuid4(),
                    session=session,
                    index=index,
                    window_id=window,
                    role="assistant",
                    kind="text",
                    content=f"note {index}",
                    created_at=now,
                )
            )
            index += 1
    Message.objects.bulk_create(rows, batch_size=5000)
    session.next_message_index = index
    session.save(update_fields=["next_message_index"])


# ---------------------------------------------------------------- the console's data


def bucket_of(n: int, now: datetime) -> datetime:
    """Every 10th row in the last hour, the next in the last day, the rest over DAYS days."""
    # Few distinct moments: the stamping issues one UPDATE per moment and table.
    if n % 10 == 0:
        return now - timedelta(minutes=5 + (n // 10) % 5 * 10)
    if n % 10 == 1:
        return now - timedelta(hours=2 + (n // 10) % 4 * 5)
    return now - timedelta(days=2 + n % (DAYS - 2))


def _stamp(model, ids_by_time: dict[datetime, list], **also) -> None:
    for moment, ids in ids_by_time.items():
        for start in range(0, len(ids), 5000):
            fields = {"created_at": moment, **{k: moment for k in also.get("same", ())}}
            model.objects.filter(pk__in=ids[start : start + 5000]).update(**fields)


def bulk_console_data(version, count: int, *, batch: int = 5000, tag: str = "") -> dict:
    """Create `count` sessions of `version`, each with one run and one reported turn; every
    5th with a maintenance job, every 7th with an error receipt. Returns counts by window."""
    now = timezone.now()
    tag = tag or uuid.uuid4().hex[:8]
    for offset in range(0, count, batch):
        numbers = range(offset, min(offset + batch, count))
        sessions = [
            Session(
                id=uuid.uuid4(),
                application_id=version.agent.application_id,
                agent_version=version,
                session_key_hash=hashlib.sha256(f"{tag}:{n}".encode()).hexdigest(),
                active_window="main" if n % 3 else "w1",
            )
            for n in numbers
        ]
        Session.objects.bulk_create(sessions)
        runs = [
            Run(id=uuid.uuid4(), session=s, status=RUN_STATUSES[n % len(RUN_STATUSES)], turns=1)
            for n, s in zip(numbers, sessions, strict=True)
        ]
        Run.objects.bulk_create(runs)
        for session, run in zip(sessions, runs, strict=True):
            session.current_run = run
        Session.objects.bulk_update(sessions, ["current_run"])
        snapshots = [
            ProjectionSnapshot(
                session=s,
                run=r,
                revision=0,
                upper_bound=1,
                window_id="main",
                protocol="unified@2",
                provider="external",
                input_tokens=1000,
                cache_read_input_tokens=400,
                output_tokens=100,
                cost=Decimal("0.0042"),
            )
            for s, r in zip(sessions, runs, strict=True)
        ]
        ProjectionSnapshot.objects.bulk_create(snapshots)
        jobs = [
            MaintenanceJob(
                session=s, window_id="main", status=JOB_STATUSES[(n // 5) % len(JOB_STATUSES)]
            )
            for n, s in zip(numbers, sessions, strict=True)
            if n % 5 == 0
        ]
        MaintenanceJob.objects.bulk_create(jobs)
        receipts = [
            ToolReceipt(
                session=s,
                tool_call_id=f"call_{n}",
                tool_name="lookup",
                result={"success": False, "error": {"code": "host_tool_failed"}},
                success=False,
                state_revision=0,
                result_message_id=uuid.uuid4(),
            )
            for n, s in zip(numbers, sessions, strict=True)
            if n % 7 == 0
        ]
        ToolReceipt.objects.bulk_create(receipts)

        by_time: dict[str, dict[datetime, list]] = defaultdict(lambda: defaultdict(list))
        for n, s, r, snap in zip(numbers, sessions, runs, snapshots, strict=True):
            moment = bucket_of(n, now)
            by_time["session"][moment].append(s.pk)
            by_time["run"][moment].append(r.pk)
            by_time["snapshot"][moment].append(snap.pk)
        jobs_by_session = {j.session_id: j.pk for j in jobs}
        receipts_by_session = {r.session_id: r.pk for r in receipts}
        for n, s in zip(numbers, sessions, strict=True):
            moment = bucket_of(n, now)
            if s.pk in jobs_by_session:
                by_time["job"][moment].append(jobs_by_session[s.pk])
            if s.pk in receipts_by_session:
                by_time["receipt"][moment].append(receipts_by_session[s.pk])
        _stamp(Session, by_time["session"])
        _stamp(ProjectionSnapshot, by_time["snapshot"])
        _stamp(ToolReceipt, by_time["receipt"])
        _stamp(MaintenanceJob, by_time["job"], same=("updated_at",))
        for moment, ids in by_time["run"].items():
            Run.objects.filter(pk__in=ids).update(created_at=moment)
            Run.objects.filter(pk__in=ids, status__in=["failed", "completed"]).update(
                finished_at=moment
            )
    return {"sessions": count}
