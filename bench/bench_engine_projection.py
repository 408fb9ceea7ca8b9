"""Micro-benchmark: a turn's projection costs O(visible messages), not O(session size).

Run from the repository root: `python bench/bench_engine_projection.py [--repeat N]`.

Each session has V visible messages in the active window `a` (above its
checkpoint) and H hidden ones: half are `a`'s covered prefix, half belong to
window `b` and are interleaved with `a`'s visible history. An in-memory "table"
with per-window sorted indices stands in for the database's
(session, window, index) index: it returns exactly the rows the view's `ReadPlan` asks
for, as the DB layer does. The table prints the rows handed to the engine and
the time of fetch + project; both must stay flat along H and grow with V.
"""

from __future__ import annotations

import argparse
import bisect
import statistics
import sys
import time
from pathlib import Path
from typing import Any

# Runnable as a plain script from a checkout, without installing the project.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from contextproto.protocol import catalog
from contextproto.protocol.folds import make_fold
from contextproto.protocol.messages import Fold, RawMessage
from contextproto.protocol.projection import ProjectionInput, project
from contextproto.protocol.state import (
    KEY_ACTIVE_WINDOW,
    covered_key,
    new_window_record,
    window_key,
)
from contextproto.protocol.view_plan import view_plan

RUN = "a" * 32
OLD_RUN = "b" * 32
VISIBLE = (50, 200, 800)
HIDDEN = (0, 10_000, 100_000)


class Table:
    """Rows indexed like the DB: by window then index, inputs by run, folds by window."""

    def __init__(self) -> None:
        self.by_window: dict[str, list[RawMessage]] = {}
        self.keys: dict[str, list[int]] = {}
        self.inputs_by_run: dict[str, list[RawMessage]] = {}
        self.folds: dict[str, list[Fold]] = {}
        self.count = 0

    def add(self, message: RawMessage) -> None:
        self.by_window.setdefault(message.window_id, []).append(message)
        self.keys.setdefault(message.window_id, []).append(message.index)
        if message.kind == "input":
            self.inputs_by_run.setdefault(message.input_run or "", []).append(message)
        self.count += 1

    def window_range(self, window: str, after: int, through: int) -> list[RawMessage]:
        keys = self.keys.get(window, [])
        lo = bisect.bisect_right(keys, after)
        hi = bisect.bisect_right(keys, through)
        return self.by_window[window][lo:hi]

    def run_inputs(self, run: str | None, through: int) -> list[RawMessage]:
        rows = self.inputs_by_run.get(run or "", [])
        return rows[: bisect.bisect_right([m.index for m in rows], through)]

    def folds_above(self, window: str | None, after: int) -> list[Fold]:
        return [f for f in self.folds.get(window or "", []) if f.first_index > after]


def build_session(visible: int, hidden: int) -> tuple[Table, dict[str, Any]]:
    table = Table()
    index = 0

    def write(window: str, kind: str, **fields: Any) -> RawMessage:
        nonlocal index
        index += 1
        role = {
            "input": "user",
            "text": "assistant",
            "tool_call": "assistant",
            "tool_result": "tool",
        }[kind]
        message = RawMessage(
            id=f"m{index}",
            index=index,
            window_id=window,
            role=role,
            kind=kind,
            content=fields.pop("content", f"message {index}"),
            run_id=RUN,
            **fields,
        )
        table.add(message)
        return message

    covered_prefix = hidden // 2
    for i in range(covered_prefix):
        if i % 50 == 0:
            write("a", "input", input_run=OLD_RUN)
        else:
            write("a", "text")
    covered = index
    write("a", "input", input_run=RUN, content="the current run's question")

    other = hidden - covered_prefix
    per_visible = other / max(visible, 1)
    owed = 0.0
    written = 1
    calls = 0
    fold_candidates: list[list[RawMessage]] = []
    while written < visible:
        owed += per_visible * (2 if written + 1 < visible else 1)
        while owed >= 1:
            write("b", "text")
            owed -= 1
        if written + 1 < visible:
            calls += 1
            call_id = f"call_{calls}"
            pair = [
                write(
                    "a",
                    "tool_call",
                    content="",
                    tool_call_id=call_id,
                    tool_name="search",
                    arguments={"q": str(calls)},
                ),
                write("a", "tool_result", content="r" * 200, tool_call_id=call_id),
            ]
            fold_candidates.append(pair)
            written += 2
        else:
            write("a", "text")
            written += 1
    b_written = len(table.by_window.get("b", []))
    for _ in range(other - b_written):  # the rest of window b after a's last message
        write("b", "text")

    # Fold every tenth exchange so fold replacement is part of the measured work.
    table.folds["a"] = [
        make_fold(
            tool_call_id=f"fold_{i}",
            window_id="a",
            messages=pair,
            summary="searched",
            created_at_index=pair[-1].index + 1,
        )
        for i, pair in enumerate(fold_candidates)
        if i % 10 == 0
    ]
    kv = {
        KEY_ACTIVE_WINDOW: "a",
        covered_key("a"): covered,
        window_key("a"): new_window_record(goal="benchmark"),
        "checkpoint/a": "summary of the covered prefix",
        "taskMemory": "bench",
    }
    return table, kv


def one_turn(table: Table, kv: dict[str, Any], upper_bound: int) -> tuple[int, Any]:
    entry = catalog.get_version("unified", 2)
    plan = view_plan(
        entry, active_window=kv[KEY_ACTIVE_WINDOW], run_id=RUN, upper_bound=upper_bound, revision=1
    )
    reads = plan.reads(kv[covered_key("a")])
    window_rows = table.window_range(reads.window_id, reads.after_index, reads.through_index)
    inputs = table.run_inputs(reads.run_id, reads.through_index)
    folds = table.folds_above(reads.folds_window, reads.folds_after_index)
    view_kv = {k: kv[k] for k in plan.kv_keys if k in kv}
    projection = project(
        ProjectionInput(
            plan=plan,
            reads=reads,
            options={
                "guiProjection": True,
                "pageSize": 200,
                "checkpointMaxCharacters": 3000,
                "maxWindows": 128,
                "maxFolds": 1024,
            },
            system_prompt="You are an agent.\n{{context_protocol}}",
            session_id="bench",
            session_inputs={"task": "bench"},
            kv=view_kv,
            window_messages=window_rows,
            run_inputs=inputs,
            folds=folds,
        )
    )
    return len(window_rows) + len(inputs) + len(folds), projection


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=30, help="timed turns per cell")
    args = parser.parse_args()

    print(
        f"{'visible':>8} {'hidden':>8} {'session':>8} {'rows to engine':>15} "
        f"{'view msgs':>10} {'median ms':>10} {'us/visible':>11}"
    )
    baseline: dict[int, float] = {}
    for visible in VISIBLE:
        for hidden in HIDDEN:
            table, kv = build_session(visible, hidden)
            upper_bound = table.count
            rows, projection = one_turn(table, kv, upper_bound)
            timings = []
            for _ in range(args.repeat):
                start = time.perf_counter()
                one_turn(table, kv, upper_bound)
                timings.append(time.perf_counter() - start)
            median_ms = statistics.median(timings) * 1000
            baseline.setdefault(visible, median_ms)
            print(
                f"{visible:>8} {hidden:>8} {table.count:>8} {rows:>15} "
                f"{len(projection.messages):>10} {median_ms:>10.3f} "
                f"{median_ms * 1000 / visible:>11.2f}"
            )
        print()
    print(
        "Hidden rows never reach the engine (rows to engine is flat along hidden); the time "
        "per turn follows the visible count."
    )
    print(
        "ratio at hidden=0, 800 vs 50 visible: "
        f"{baseline[800] / baseline[50]:.1f}x for 16x the messages"
    )


if __name__ == "__main__":
    main()
