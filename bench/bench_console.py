"""Console (issue 27): the dashboard and search pages on PostgreSQL with 100k sessions.

Bulk-creates `--sessions` sessions of one version (tests/builders/bulk.py: one run and
one reported turn each, every 5th with a maintenance job, every 7th with an error receipt;
a tenth in the last hour, a tenth in the last day, the rest over a month) plus one session
of `--messages` raw messages, a few of which hold a rare word. Then it requests each page
`--repeat` times through Django's test client as a superuser (the whole view: permissions,
queries, template) and reports the median and p95 wall time and the number of queries.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/contextproto_bench \\
        .venv/bin/python bench/bench_console.py [--sessions 100000] [--write]

The database must be migrated; rows from an earlier run are kept (the bench adds to them
only up to `--sessions`). `--write` replaces this section of BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import sys
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import benchlib

SECTION = benchlib.Section("<!-- console:begin -->", "<!-- console:end -->")
APP_NAME = "Console bench"
RARE = "zanzibar"


def _version() -> Any:
    from agents.models import Agent, AgentVersion, Application

    application, _ = Application.objects.get_or_create(name=APP_NAME)
    agent, _ = Agent.objects.get_or_create(application=application, name="bench")
    version = agent.versions.first()
    if version is None:
        version = AgentVersion.objects.create(
            agent=agent,
            number=1,
            status=AgentVersion.Status.PUBLISHED,
            system_prompt="You are a helpful agent.\n{{context_protocol}}",
            context_protocol_id="unified",
            context_protocol_version=2,
            model_provider="external",
            model_name="bench-model",
            max_input_tokens=8000,
            prices={"input": 3, "cacheRead": 0.3, "cacheWrite": 3.75, "output": 15},
        )
    return version


def _log_session(version: Any, count: int) -> Any:
    """One session of `count` raw messages; every 1000th mentions RARE."""
    from django.utils import timezone

    from sessions_app.models import Message, Session

    session = Session.objects.create(
        application_id=version.agent.application_id,
        agent_version=version,
        session_key_hash=uuid.uuid4().hex * 2,
    )
    now = timezone.now()
    for start in range(0, count, 5000):
        Message.objects.bulk_create(
            Message(
                session=session,
                index=n + 1,
                window_id="main",
                role="assistant",
                kind="text",
                content=f"step {n}: looked at {RARE} port" if n % 1000 == 7 else f"note {n} ok",
                created_at=now,
            )
            for n in range(start, min(start + 5000, count))
        )
    Session.objects.filter(pk=session.pk).update(next_message_index=count + 1)
    return session


def _measure(client: Any, path: str, repeat: int) -> dict[str, Any]:
    client.get(path)  # warm caches
    times, queries = [], 0
    for _ in range(repeat):
        with benchlib.sql_clock() as clock:
            start = time.perf_counter()
            response = client.get(path)
            times.append(time.perf_counter() - start)
        assert response.status_code == 200, (path, response.status_code)
        queries = clock.queries
    return {
        "median_ms": benchlib.ms(benchlib.median(times)),
        "p95_ms": benchlib.ms(benchlib.p95(times)),
        "queries": queries,
    }


def run(sessions: int, messages: int, repeat: int) -> dict[str, Any]:
    from django.contrib.auth.models import User
    from django.db import connection
    from django.test import Client
    from django.test.utils import override_settings

    from sessions_app.models import Session
    from tests.builders.bulk import bulk_console_data

    benchlib.banner(f"Console: dashboard and search with {sessions:,} sessions")
    started = time.perf_counter()
    version = _version()
    have = Session.objects.filter(agent_version=version).count()
    if have < sessions:
        benchlib.log(f"creating {sessions - have:,} sessions (have {have:,})")
        bulk_console_data(version, sessions - have, tag=uuid.uuid4().hex[:8])
    log = Session.objects.filter(agent_version=version, next_message_index=messages + 1).first()
    if log is None:
        log = _log_session(version, messages)
    # The bulk load updates every row's created_at once: vacuum, as autovacuum would have.
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE")
    total = Session.objects.count()
    assert total >= sessions
    user = User.objects.filter(username="console-bench").first() or User.objects.create_superuser(
        "console-bench", "bench@example.com", "pw"
    )
    sample = (
        Session.objects.filter(agent_version=version)
        .order_by("pk")
        .values_list("pk", flat=True)[total // 2]
    )
    pages = [
        ("dashboard (admin index)", "/admin/"),
        ("sessions, no filter (newest 50)", "/admin/sessions_app/session/search/"),
        (
            "sessions by 6-digit id prefix",
            f"/admin/sessions_app/session/search/?id={str(sample)[:6]}",
        ),
        (
            "sessions: current run failed, window main",
            "/admin/sessions_app/session/search/?status=failed&window=main",
        ),
        (
            f"messages of a {messages:,}-message session: rare word",
            f"/admin/sessions_app/session/{log.pk}/browse/search/?q={RARE}",
        ),
        (
            f"messages of a {messages:,}-message session: common word",
            f"/admin/sessions_app/session/{log.pk}/browse/search/?q=note",
        ),
    ]
    client = Client()
    client.force_login(user)
    rows = []
    with override_settings(ALLOWED_HOSTS=["*"]):
        for label, path in pages:
            measured = _measure(client, path, repeat)
            benchlib.log(f"{label}: {measured}")
            rows.append({"page": label, **measured})
    return {
        "sessions": total,
        "messages": messages,
        "repeat": repeat,
        "rows": rows,
        "machine": benchlib.machine(),
        "seconds": time.perf_counter() - started,
    }


def render_section(result: dict[str, Any]) -> str:
    machine = result["machine"]
    table = benchlib.table(
        ["page", "median ms", "p95 ms", "queries"],
        [[r["page"], r["median_ms"], r["p95_ms"], r["queries"]] for r in result["rows"]],
    )
    return "\n".join(
        [
            "## Console: dashboard and search (issue 27)",
            "",
            f"`bench/bench_console.py` on {machine['postgres']}, {machine['nproc']} cores. "
            f"{result['sessions']:,} sessions in the database (one run and one reported turn "
            "each, a maintenance job for every 5th, an error receipt for every 7th; a tenth "
            "started in the last hour, a tenth in the last day, the rest over a month), and "
            f"one session of {result['messages']:,} raw messages. Each page is requested "
            f"{result['repeat']} times through Django's test client as a superuser: the whole "
            "view (permissions, queries, template), without the network.",
            "",
            table,
            "",
            "The dashboard's reads (eight; nine for a member, whose Applications come first) are "
            "range scans on the indexes of migration 0013 "
            "(runs started in the last day, runs in progress, the last hour's failures, "
            "today's reported turns), so its time follows the last day's activity, not the "
            "table sizes. This dataset is a busy day: a fifth of the sessions (about "
            f"{result['sessions'] // 5:,} runs and as many reported turns) fall in the last "
            "day, and the two heaviest reads aggregate exactly those (runs by status, "
            "today's tokens by version joined to their sessions). Session search pages "
            "newest first on `session_created`, an id prefix is a primary-key range, and "
            "message search uses the GIN full-text index.",
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--sessions", type=int, default=100_000)
    parser.add_argument("--messages", type=int, default=50_000)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--write", action="store_true", help="update BENCHMARKS.md")
    args = parser.parse_args()
    benchlib.refuse_unless_postgres()
    benchlib.django_setup()
    result = run(args.sessions, args.messages, args.repeat)
    if args.write:
        path = benchlib.ROOT / "BENCHMARKS.md"
        SECTION.write(path, render_section(result))
        print(f"\nbench: wrote the console section of {path}")
    print(f"bench: {result['seconds']:.1f} s")


if __name__ == "__main__":
    main()
