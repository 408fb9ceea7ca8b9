"""Projection scaling: `projection_build` at 1k..1M messages against a bare SQL read.

Every session has the same visible view (bench_data); the bare query returns exactly the
rows that view needs (the active window above its checkpoint, the current run's inputs,
the view's KV keys and the folds of W above C with their KV values) over the same
indexes, and decodes them as the ORM would. Sizes are measured interleaved, repetition by
repetition, so a drift of the machine touches all of them alike.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import bench_data
from benchlib import banner, log, median, ms, p95, sql_clock, table

SIZES = (1_000, 10_000, 100_000, 1_000_000)
APPLICATION = f"bench-projection-L{bench_data.LAYOUT}"
PROVIDER = "openai-chat"
WARMUP = 3

VIEW_KEYS_SQL = """
SELECT key, value FROM sessions_app_kventry WHERE session_id = %s AND key = ANY(%s)
UNION ALL
SELECT k.key, k.value
FROM sessions_app_foldrecord f
JOIN sessions_app_kventry k ON k.session_id = f.session_id AND k.key = 'fold/' || f.fold_id
WHERE f.session_id = %s AND f.window_id = %s AND f.first_index > %s
"""
# {columns}: the codec's SELECT list (sessions_app.store.codec.sql_columns), filled in once
# Django is set up.
VIEW_ROWS_SQL = """
SELECT {columns} FROM sessions_app_message
WHERE session_id = %s AND window_id = %s AND index > %s AND index <= %s
UNION ALL
SELECT {columns} FROM sessions_app_message
WHERE session_id = %s AND kind = 'input' AND input_run = %s AND index <= %s
  AND NOT (window_id = %s AND index > %s)
ORDER BY 2
"""


class Stopwatch:
    """Wraps a function and adds the time spent in it to `seconds` (bench instrumentation)."""

    def __init__(self) -> None:
        self.seconds = 0.0

    def wrap(self, function: Any) -> Any:
        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - start

        return timed


@contextmanager
def engine_stopwatch() -> Iterator[Stopwatch]:
    """Time the pure engine work inside projection_build: project, adapt and to_wire."""
    from contextproto.protocol import adapters
    from contextproto.protocol import projection as engine

    watch = Stopwatch()
    saved = (engine.project, adapters.adapt, engine.Projection.to_wire)
    engine.project = watch.wrap(saved[0])
    adapters.adapt = watch.wrap(saved[1])
    engine.Projection.to_wire = watch.wrap(saved[2])
    try:
        yield watch
    finally:
        engine.project, adapters.adapt, engine.Projection.to_wire = saved


@contextmanager
def snapshot_stopwatch() -> Iterator[Stopwatch]:
    """Time the snapshot write inside projection_build (`snapshot_create`: the request hash,
    the base read, the body's encoding and the INSERT of row and body)."""
    from sessions_app.services import projection

    watch = Stopwatch()
    saved = projection.snapshot_create
    projection.snapshot_create = watch.wrap(saved)
    try:
        yield watch
    finally:
        projection.snapshot_create = saved


@dataclass
class Cell:
    built: bench_data.Built
    projection: list[float] = field(default_factory=list)
    sql: list[float] = field(default_factory=list)
    snapshot_insert: list[float] = field(default_factory=list)
    snapshot_write: list[float] = field(default_factory=list)
    engine: list[float] = field(default_factory=list)
    queries: int = 0
    bare: list[float] = field(default_factory=list)
    bare_rows: int = 0
    bare_kv: int = 0
    view_messages: int = 0
    view_chars: int = 0


def prepare(sizes: tuple[int, ...]) -> list[bench_data.Built]:
    """Reuse the sessions of an earlier run (tagged by Application and Agent) or build them."""
    from sessions_app.models import Session

    built = []
    for total in sizes:
        version = bench_data.bench_version(APPLICATION, f"projection-{total}")
        session = Session.objects.filter(agent_version=version).order_by("created_at").first()
        if session is not None and session.last_index == total:
            built.append(bench_data.describe(session))
            log(f"{total:>9,} messages: reusing session {session.id}")
            continue
        log(f"{total:>9,} messages: building (COPY, seeded) ...")
        result = bench_data.build_session(version, total)
        log(f"{total:>9,} messages: built in {result.seconds:.1f} s ({result.session_id})")
        built.append(result)
    return built


def _bare(built: bench_data.Built, keys: list[str]) -> tuple[int, int]:
    from django.db import connection, transaction

    from sessions_app.store.codec import sql_columns

    sid, window, covered = built.session_id, built.window_id, built.covered_through
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(VIEW_KEYS_SQL, [sid, keys, sid, window, covered])
        # Django reads jsonb as text and decodes it itself: decode too, as the ORM does.
        kv = [(key, json.loads(value)) for key, value in cursor.fetchall()]
        cursor.execute(
            VIEW_ROWS_SQL.format(columns=sql_columns()),
            [
                sid,
                window,
                covered,
                built.upper_bound,
                sid,
                built.run_hex,
                built.upper_bound,
                window,
                covered,
            ],
        )
        rows = [
            (
                *r[:5],
                json.loads(r[5]),
                *r[6:10],
                None if r[10] is None else json.loads(r[10]),
                *r[11:],
            )
            for r in cursor.fetchall()
        ]
    return len(rows), len(kv)


def _view_keys(window: str) -> list[str]:
    from contextproto.protocol import catalog
    from contextproto.protocol.view_plan import view_plan

    entry = catalog.get_version("unified", 4)
    plan = view_plan(entry, active_window=window, run_id=None, upper_bound=0, revision=0)
    return list(plan.kv_keys)


def measure(built: list[bench_data.Built], reps: int) -> list[Cell]:
    from sessions_app.services.projection import projection_build

    cells = [Cell(b) for b in built]
    keys = {c.built.window_id: _view_keys(c.built.window_id) for c in cells}
    for cell in cells:
        for _ in range(WARMUP):
            snapshot = projection_build(
                session_id=cell.built.session_id, provider=PROVIDER, use_cache=False
            )
            cell.bare_rows, cell.bare_kv = _bare(cell.built, keys[cell.built.window_id])
        cell.view_messages = len(snapshot.messages)
        cell.view_chars = len(json.dumps(snapshot.request, sort_keys=True))
    for _rep in range(reps):
        for cell in cells:
            with sql_clock() as clock, engine_stopwatch() as watch, snapshot_stopwatch() as write:
                start = time.perf_counter()
                projection_build(
                    session_id=cell.built.session_id, provider=PROVIDER, use_cache=False
                )
                cell.projection.append(time.perf_counter() - start)
            cell.snapshot_write.append(write.seconds)
            cell.sql.append(clock.seconds)
            cell.engine.append(watch.seconds)
            cell.snapshot_insert.append(
                sum(s for head, s in clock.by_prefix.items() if "projectionsnapshot" in head)
            )
            cell.queries = clock.queries
            start = time.perf_counter()
            _bare(cell.built, keys[cell.built.window_id])
            cell.bare.append(time.perf_counter() - start)
    return cells


def read_build(cell: Cell) -> float:
    """Median time of projection_build without its snapshot write (same repetitions)."""
    return median([p - w for p, w in zip(cell.projection, cell.snapshot_write, strict=True)])


def run(reps: int, sizes: tuple[int, ...] = SIZES) -> dict[str, Any]:
    banner(f"1. Projection: projection_build(use_cache=False, provider={PROVIDER}) vs bare SQL")
    started = time.perf_counter()
    built = prepare(sizes)
    prepared = time.perf_counter() - started
    cells = measure(built, reps)
    base = median(cells[0].projection)
    headers = (
        "messages",
        "view msgs",
        "rows+KV read",
        "queries",
        "median ms",
        "p95 ms",
        "SQL ms",
        "snapshot INSERT ms",
        "snapshot write ms",
        "engine ms",
        "bare median ms",
        "bare p95 ms",
        "read+build / bare",
        "proj / bare",
        "proj / proj@1k",
    )
    rows = []
    for cell in cells:
        proj = median(cell.projection)
        bare = median(cell.bare)
        rows.append(
            (
                cell.built.total,
                cell.view_messages,
                f"{cell.bare_rows}+{cell.bare_kv}",
                cell.queries,
                ms(proj),
                ms(p95(cell.projection)),
                ms(median(cell.sql)),
                ms(median(cell.snapshot_insert)),
                ms(median(cell.snapshot_write)),
                ms(median(cell.engine)),
                ms(bare),
                ms(p95(cell.bare)),
                read_build(cell) / bare,
                proj / bare,
                proj / base,
            )
        )
    text = table(headers, rows)
    print(text)
    largest = cells[-1]
    result = {
        "table": text,
        "reps": reps,
        "prepare_seconds": prepared,
        "reused": all(c.built.reused for c in cells),
        "scaling": median(largest.projection) / base,
        "largest": largest.built.total,
        "vs_bare": max(median(c.projection) / median(c.bare) for c in cells),
        "vs_bare_min": min(median(c.projection) / median(c.bare) for c in cells),
        "build_vs_bare": max(read_build(c) / median(c.bare) for c in cells),
        "build_vs_bare_min": min(read_build(c) / median(c.bare) for c in cells),
        "cells": cells,
        "view_chars": [c.view_chars for c in cells],
        "seconds": time.perf_counter() - started,
    }
    log(
        f"{reps} repetitions per size; sessions {'reused' if result['reused'] else 'built'} "
        f"in {prepared:.1f} s; section {result['seconds']:.1f} s"
    )
    return result
