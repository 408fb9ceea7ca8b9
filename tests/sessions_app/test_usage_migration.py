"""The usage-columns migration fills them from the usage JSON already stored (issue 24).

Rolls the schema back to before the migration, writes snapshots the way earlier code stored
their usage (every spelling it used), migrates forward and reads the columns.
"""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

BEFORE = [("sessions_app", "0009_snapshot_body"), ("agents", "0002_model_prompt_cache_prices")]
AFTER = [("sessions_app", "0010_snapshot_usage_columns")]
PRICES = {"input": 3, "cacheRead": 0.3, "cacheWrite": 3.75, "output": 15}

# (usage JSON as stored before the columns, expected columns without the cost)
STORED = {
    "host, old alias": (
        {"inputTokens": 6000, "outputTokens": 12, "cachedInputTokens": 4000},
        (6000, 4000, 0, 12),
    ),
    "openai runtime": (
        {"inputTokens": 2000, "outputTokens": 40, "cachedInputTokens": 1536, "reasoningTokens": 9},
        (2000, 1536, 0, 40),
    ),
    "anthropic runtime": (
        {
            "inputTokens": 1250,
            "outputTokens": 5,
            "uncachedInputTokens": 50,
            "cacheCreationInputTokens": 200,
            "cacheReadInputTokens": 1000,
        },
        (1250, 1000, 200, 5),
    ),
    "scripted estimate": (
        {"inputTokens": 700, "outputTokens": 3, "estimated": True},
        (700, 0, 0, 3),
    ),
    "input only": ({"inputTokens": 1234}, (1234, 0, 0, 0)),
}


def _migrate(targets) -> MigrationExecutor:
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    return executor


@pytest.mark.django_db(transaction=True)
def test_the_backfill_reads_every_stored_spelling_and_prices_the_turns():
    try:
        executor = _migrate(BEFORE)
        old = executor.loader.project_state(BEFORE).apps
        Application = old.get_model("agents", "Application")
        Agent = old.get_model("agents", "Agent")
        AgentVersion = old.get_model("agents", "AgentVersion")
        Session = old.get_model("sessions_app", "Session")
        Snapshot = old.get_model("sessions_app", "ProjectionSnapshot")

        app = Application.objects.create(name="Acme")
        agent = Agent.objects.create(application=app, name="a")
        ids: dict[tuple[bool, str], object] = {}
        for n, prices in enumerate((PRICES, None, {"input": 3})):  # the last: incomplete
            version = AgentVersion.objects.create(
                agent=agent,
                number=n + 1,
                status="published",
                context_protocol_id="unified",
                context_protocol_version=2,
                prices=prices,
            )
            session = Session.objects.create(
                application=app, agent_version=version, session_key_hash=f"h{n}"
            )
            for name, (usage, _) in STORED.items():
                row = Snapshot.objects.create(
                    session=session,
                    revision=0,
                    upper_bound=0,
                    window_id="main",
                    protocol="unified@2",
                    provider="neutral",
                    usage=usage,
                )
                ids[(n, name)] = row.pk
            unreported = Snapshot.objects.create(
                session=session,
                revision=0,
                upper_bound=0,
                window_id="main",
                protocol="unified@2",
                provider="neutral",
            )
            ids[(n, "unreported")] = unreported.pk

        executor = _migrate(AFTER)
        # The table as that migration left it: later migrations add columns today's model has.
        ProjectionSnapshot = executor.loader.project_state(AFTER).apps.get_model(
            "sessions_app", "ProjectionSnapshot"
        )

        def columns(pk):
            row = ProjectionSnapshot.objects.get(pk=pk)
            tokens = (
                row.input_tokens,
                row.cache_read_input_tokens,
                row.cache_write_input_tokens,
                row.output_tokens,
            )
            return tokens, row.cost

        for name, (usage, expected) in STORED.items():
            tokens, cost = columns(ids[(0, name)])
            assert tokens == expected, name
            total, read, write, output = expected
            spec = Decimal(total - read - write) * 3 + Decimal(read) * Decimal("0.3")
            spec += Decimal(write) * Decimal("3.75") + Decimal(output) * 15
            assert cost == spec / 1_000_000, name
            assert ProjectionSnapshot.objects.get(pk=ids[(0, name)]).usage == usage  # kept
            for unpriced in (1, 2):  # no prices, or prices that would not publish today
                assert columns(ids[(unpriced, name)]) == (expected, None), name
        for n in range(3):
            assert columns(ids[(n, "unreported")]) == ((None, 0, 0, None), None)
    finally:
        executor = MigrationExecutor(connection)
        executor.loader.build_graph()
        executor.migrate(executor.loader.graph.leaf_nodes())
