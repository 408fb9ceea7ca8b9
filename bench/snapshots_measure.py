"""The snapshot storage section's three measurements: bytes, the turn's cost, reads.

Bytes per turn of scripted sessions, the turn's cost of storing its view (whole as before
issue 33, in one call, in two commits), and cold reads against whole bodies;
bench/bench_snapshots.py's docstring says how each figure is taken, and runs them.
"""

from __future__ import annotations

import time
import zlib
from typing import Any

from benchlib import log, median, p95

APPLICATION = "bench-snapshots"
VIEWS = ("unified@2", "unified@4", "prefix@2")
BUDGETS = (16_000, 128_000)
MODES = ("whole", "row only", "one call", "two commits")
# The turn's cost is a few ms against a shared machine's noise: more repetitions than the
# sections that take a second each.
COST_REPS_FACTOR = 3
PROVIDER = "openai-chat"


# --------------------------------------------------------------------------- 1. storage


def _versions(budget: int) -> dict[str, Any]:
    """A published AgentVersion per view at `budget`, like the token economy's."""
    import bench_tokens

    from agents.models import Agent, AgentVersion, Application, Tool
    from labs.scenario import PROTOCOL_VIEWS

    application, _ = Application.objects.get_or_create(name=APPLICATION)
    tools = []
    for name in (*bench_tokens.LOOKUP_TOOLS, bench_tokens.NOTE_TOOL):
        tool, _ = Tool.objects.get_or_create(
            application=application,
            name=name,
            defaults={"description": f"Host tool {name}.", "input_schema": {"type": "object"}},
        )
        tools.append(tool)
    unified_script, prefix_script, _inputs = bench_tokens.build_scripts()

    def version(name: str, **fields: Any) -> AgentVersion:
        agent, _ = Agent.objects.get_or_create(application=application, name=name)
        return AgentVersion.objects.create(
            agent=agent,
            number=(agent.versions.count() or 0) + 1,
            status=AgentVersion.Status.PUBLISHED,
            model_provider="scripted",
            model_name="scripted-bench",
            max_input_tokens=budget,
            max_turns_per_run=60,
            **fields,
        )

    maintainer = version(
        "context-maintainer",
        system_prompt="You write checkpoints of agent conversations.",
        context_protocol_id="prefix",
        context_protocol_version=2,
        model_config=bench_tokens._maintainer_script(),
    )
    prompt = "You are ACME's sales assistant. You prepare quotes.\n\n{{context_protocol}}"
    made = {}
    for view in PROTOCOL_VIEWS:
        if view.label not in VIEWS:
            continue
        made[view.label] = version(
            f"quote-assistant ({view.label}, {budget // 1000}k)",
            system_prompt=prompt,
            context_protocol_id=view.protocol_id,
            context_protocol_version=view.version,
            options=dict(view.options),
            model_config=(
                bench_tokens.script_for_view(unified_script, view)
                if view.windowed
                else prefix_script
            ),
            maintainer_agent=maintainer.agent,
        )
        made[view.label].tools.set(tools)
    return made


def _log_bytes(session_id: Any) -> tuple[int, int]:
    """The session's message rows as stored (every column's `pg_column_size`: a value TOAST
    compressed counts compressed; plus a 24-byte tuple header) and as JSON text."""
    from django.db import connection

    from sessions_app.models import Message

    table = Message._meta.db_table
    with connection.cursor() as cursor:
        columns = [c.name for c in connection.introspection.get_table_description(cursor, table)]
        sizes = " + ".join(f'coalesce(pg_column_size(m."{c}"), 0)' for c in columns)
        cursor.execute(
            f"SELECT coalesce(sum(24 + {sizes}), 0), "
            f"coalesce(sum(octet_length(row_to_json(m)::text)), 0) "
            f"FROM {table} m WHERE m.session_id = %s",
            [session_id],
        )
        stored, text = cursor.fetchone()
        return int(stored), int(text)


def _storage_row(label: str, budget: int, session: Any) -> dict[str, Any]:
    from sessions_app.models import ProjectionSnapshot
    from sessions_app.store import body_codec, snapshot_bodies

    snapshot_bodies.forget_cache()
    snapshots = list(ProjectionSnapshot.objects.filter(session=session).order_by("created_at"))
    snapshot_bodies.views_of(snapshots)
    turns = len(snapshots)
    old = sum(len(zlib.compress(body_codec.body_text(s.view.body).encode(), 1)) for s in snapshots)
    states = {s.body_state for s in snapshots}
    if states != {"stored"}:
        raise RuntimeError(f"{label} {budget}: bodies in states {states}")
    log_stored, log_text = _log_bytes(session.id)
    return {
        "view": label,
        "budget": budget,
        "turns": turns,
        "log": log_stored / turns,
        "log_text": log_text / turns,
        "raw": sum(s.view_bytes or 0 for s in snapshots) / turns,
        "before": old / turns,
        "stored": sum(s.body_bytes or 0 for s in snapshots) / turns,
        "keyframes": sum(1 for s in snapshots if s.body_encoding == "key"),
        "deltas": sum(1 for s in snapshots if s.body_encoding == "delta"),
        "session": session,
    }


def storage() -> list[dict[str, Any]]:
    import bench_tokens
    from django.test.utils import override_settings

    _unified, _prefix, inputs = bench_tokens.build_scripts()
    rows = []
    with override_settings(RUNTIME_AUTOSTART=False, CELERY_TASK_ALWAYS_EAGER=True):
        for budget in BUDGETS:
            for label, version in _versions(budget).items():
                began = time.perf_counter()
                session = bench_tokens._drive(version, inputs, bench_tokens.SIZES_FIXED)
                rows.append(_storage_row(label, budget, session))
                log(
                    f"{label} {budget // 1000}k: {rows[-1]['turns']} turns in "
                    f"{time.perf_counter() - began:.1f} s"
                )
    return rows


# --------------------------------------------------------------------------- 2. the turn


def _whole_create(**kwargs: Any) -> Any:
    """The snapshot as the code before issue 33 stored it: the whole body, zlib level 1 of
    its JSON text, inserted with the row (the baseline; no product code writes it so)."""
    from sessions_app.models import ProjectionSnapshot
    from sessions_app.store import body_codec
    from sessions_app.store.snapshot_bodies import request_hash
    from sessions_app.store.snapshot_view import SnapshotView

    body = kwargs.pop("body")
    data = body_codec.body_text(body).encode()
    packed = body_codec.legacy_encode(data)
    snapshot = ProjectionSnapshot.objects.create(
        **kwargs,
        body=packed,
        body_encoding="json",
        body_bytes=len(packed),
        view_bytes=len(data),
        request_hash=request_hash(body["request"]),
    )
    snapshot.attach_view(SnapshotView(body=body))
    return snapshot


def turn_cost(reps: int) -> dict[str, Any]:
    """`projection_build` per way of storing its snapshot, interleaved with the bare read:
    `whole` (before issue 33), `row only` (before issue 42: what the turn did when a thread
    wrote the body after its commit; the body is never written here), `one call` (row and
    body, what projection_build does) and `two commits` (the row in the turn; the body
    encoded off its path, as while the model call is in flight, and stored in a second
    transaction, whose statement is on the path)."""
    import bench_projection
    from django.db import connection, transaction

    from sessions_app.models import ProjectionSnapshot
    from sessions_app.services import projection
    from sessions_app.store import body_writer, snapshot_bodies

    built = bench_projection.prepare((1000,))[0]
    keys = bench_projection._view_keys(built.window_id)
    # Planner statistics after section 1's 1,800 snapshots (autovacuum may not have run yet).
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE sessions_app_projectionsnapshot")
    times: dict[str, list[float]] = {mode: [] for mode in MODES}
    snapshot: dict[str, list[float]] = {mode: [] for mode in MODES}
    encode: list[float] = []
    made_last: list[Any] = []
    bare: list[float] = []
    original_create = projection.snapshot_create

    def row_only(**kwargs: Any) -> Any:
        with transaction.atomic():
            return body_writer.snapshot_row_create(**kwargs)

    creators = {
        "whole": _whole_create,
        "row only": row_only,
        "one call": original_create,
        "two commits": row_only,
    }
    row_only_ids: list[Any] = []

    def build(mode: str, record: bool) -> None:
        spent = [0.0]

        def create(**kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return creators[mode](**kwargs)
            finally:
                spent[0] += time.perf_counter() - start

        projection.snapshot_create = create
        try:
            start = time.perf_counter()
            made = projection.projection_build(
                session_id=built.session_id, provider=PROVIDER, use_cache=False
            )
            elapsed = time.perf_counter() - start
        finally:
            projection.snapshot_create = original_create
        if mode == "row only":
            row_only_ids.append(made.pk)  # never stored: deleted below
        if mode == "two commits":
            made_last[:] = [made]
            start = time.perf_counter()
            encoded = body_writer.body_encode(made, made.view.body)  # off the turn's path
            encoded_in = time.perf_counter() - start
            # The turn's second transaction: its COMMIT is the answer's, paid with or without
            # the body, so only the store's own statements are timed.
            with transaction.atomic():
                start = time.perf_counter()
                body_writer.body_store(encoded)
                stored_in = time.perf_counter() - start
            elapsed += stored_in
            spent[0] += stored_in
            if record:
                encode.append(encoded_in)
        if record:
            times[mode].append(elapsed)
            snapshot[mode].append(spent[0])

    for _ in range(3):
        for mode in MODES:
            build(mode, record=False)
        bench_projection._bare(built, keys)
    reps *= COST_REPS_FACTOR
    for _ in range(reps):
        for mode in MODES:
            build(mode, record=True)
        start = time.perf_counter()
        bench_projection._bare(built, keys)
        bare.append(time.perf_counter() - start)
    # The two-commit turn's encoding when this process does not hold the base decoded (the
    # previous turn ran in another process): the base's rows are read and decoded too.
    cold: list[float] = []
    for _ in range(10):
        snapshot_bodies.forget_cache()
        start = time.perf_counter()
        body_writer.body_encode(made_last[0], made_last[0].view.body)
        cold.append(time.perf_counter() - start)
    ProjectionSnapshot.objects.filter(pk__in=row_only_ids).delete()
    b = median(bare)
    rows = {}
    for mode in MODES:
        read_build = median([t - s for t, s in zip(times[mode], snapshot[mode], strict=True)])
        rows[mode] = {
            "median": median(times[mode]),
            "p95": p95(times[mode]),
            "snapshot": median(snapshot[mode]),
            "read_build": read_build,
            "ratio": median(times[mode]) / b,
            "read_build_ratio": read_build / b,
        }
    return {
        "bare": b,
        "bare_p95": p95(bare),
        "modes": rows,
        "encode": median(encode),
        "encode_p95": p95(encode),
        "encode_cold": median(cold),
        "reps": reps,
    }


# --------------------------------------------------------------------------- 3. reads


def read_times(row: dict[str, Any]) -> dict[str, Any]:
    """Every snapshot of the session read cold, against the same bodies stored whole."""
    import uuid

    from sessions_app.models import ProjectionSnapshot
    from sessions_app.store import body_codec, snapshot_bodies

    snapshots = list(
        ProjectionSnapshot.objects.filter(session=row["session"]).order_by("created_at")
    )
    snapshot_bodies.views_of(snapshots)
    mirrors = []
    for s in snapshots:
        text = body_codec.body_text(s.view.body).encode()
        mirrors.append(
            ProjectionSnapshot(
                id=uuid.uuid4(),
                session_id=s.session_id,
                run_id=s.run_id,
                revision=s.revision,
                upper_bound=s.upper_bound,
                window_id=s.window_id,
                protocol=s.protocol,
                options=s.options,
                provider=s.provider,
                notes=s.notes,
                build_inputs=s.build_inputs,
                body=body_codec.legacy_encode(text),
                body_encoding="json",
                body_bytes=0,
            )
        )
    ProjectionSnapshot.objects.bulk_create(mirrors)
    now, old, by_depth = [], [], {}
    try:
        for s, mirror in zip(snapshots, mirrors, strict=True):
            for target, into in ((s.pk, now), (mirror.pk, old)):
                snapshot_bodies.forget_cache()
                start = time.perf_counter()
                found = ProjectionSnapshot.objects.get(pk=target)
                found.view  # noqa: B018 (the read being timed)
                into.append(time.perf_counter() - start)
            if found.view.body != s.view.body:
                raise RuntimeError(f"snapshot {s.pk}: whole copy differs")
            by_depth.setdefault(s.body_depth, []).append(now[-1])
    finally:
        ProjectionSnapshot.objects.filter(pk__in=[m.pk for m in mirrors]).delete()
    deepest = max(by_depth)
    return {
        "view": row["view"],
        "budget": row["budget"],
        "reads": len(now),
        "now": median(now),
        "now_p95": p95(now),
        "now_max": max(now),
        "old": median(old),
        "old_p95": p95(old),
        "deepest": deepest,
        "deepest_median": median(by_depth[deepest]),
        "ratio": median(now) / median(old),
        "deepest_ratio": median(by_depth[deepest]) / median(old),
    }
