"""Seeded, bulk-inserted benchmark sessions with one fixed visible view (contract §2.3, §4).

A session of `total` messages spread over 50 windows (`main`, w01..w49) ends like this:

* a hidden prefix: every window's history, all covered by the windows' checkpoints
  (`coveredThrough/<w>` = P), with earlier runs' inputs and one folded tool exchange per
  1000 messages (1000 at most), some of them in the active window below C (compressed);
* the current run's input (in `main`, written with `run_start`), then the active window
  `w01`'s 200 visible messages (texts and host tool call/result pairs, 4 folds of 3 groups)
  interleaved with other windows' messages (10% of the hidden rows).

The visible messages have the same content at every size (their own seed), so every
session shows the same view; only indices, ids and the number of hidden rows differ.
Messages are inserted with COPY (raw inserts are allowed; messages are never updated),
then `Session.next_message_index` is advanced; KV goes through `kv_commit`, which also
keeps FoldRecord/WindowRecord. A build is one transaction: a session exists complete or
not at all.
"""

from __future__ import annotations

import json
import random
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

LAYOUT = 1  # bump when the layout changes: new sessions are built, old ones ignored
SEED = 20240601
WINDOWS = ["main"] + [f"w{n:02d}" for n in range(1, 50)]
ACTIVE = "w01"
VISIBLE = 200
FOLDED_GROUPS = ((3, 4, 5), (20, 21, 22), (40, 41, 42), (60, 61, 62))
HIDDEN_FOLDS_PER = 1000
HIDDEN_FOLDS_MAX = 1000
TAIL_SHARE = 0.10
COPY_BATCH = 10_000
BASE_TIME = datetime(2025, 1, 1, tzinfo=UTC)
WORDS = (
    "quote laptop budget delivery region stock price invoice customer order shipping "
    "warehouse supplier discount contract review schedule tuesday approval total margin "
    "catalogue item tax euro batch carrier route confirm check note result"
).split()


def copy_columns() -> tuple[str, ...]:
    """The columns of a COPY row: the codec's RAW_COLUMNS with session_id after the id."""
    from sessions_app.store.codec import RAW_COLUMNS

    return ("id", "session_id", *RAW_COLUMNS[1:])


@dataclass
class Built:
    """What a benchmark needs to know about a session it did not build itself."""

    session_id: Any
    total: int
    window_id: str
    covered_through: int
    upper_bound: int
    run_hex: str
    free_pairs: list[tuple[int, int]] = field(default_factory=list)
    reused: bool = False
    seconds: float = 0.0


def _uuid(rng: random.Random) -> uuid.UUID:
    return uuid.UUID(int=rng.getrandbits(128), version=4)


def _words(rng: random.Random, count: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(count))


def _copy_text(value: Any) -> str:
    """One field of COPY's text format."""
    if value is None:
        return "\\N"
    if isinstance(value, bool):
        return "t" if value else "f"
    if isinstance(value, datetime):
        return value.isoformat()
    text = str(value)
    if "\\" in text or "\t" in text or "\n" in text or "\r" in text:
        text = (
            text.replace("\\", "\\\\")
            .replace("\t", "\\t")
            .replace("\n", "\\n")
            .replace("\r", "\\r")
        )
    return text


def copy_messages(rows: Iterable[tuple]) -> int:
    """COPY message rows (tuples in copy_columns() order) into the log, in batches of COPY_BATCH."""
    from django.db import connection

    columns = ", ".join(f'"{c}"' for c in copy_columns())
    sql = f"COPY sessions_app_message ({columns}) FROM STDIN"
    count = 0
    buffer: list[str] = []
    with connection.cursor() as cursor, cursor.copy(sql) as copy:
        for row in rows:
            buffer.append("\t".join(_copy_text(v) for v in row))
            count += 1
            if len(buffer) >= COPY_BATCH:
                copy.write("\n".join(buffer) + "\n")
                buffer.clear()
        if buffer:
            copy.write("\n".join(buffer) + "\n")
    return count


class _Writer:
    """Assigns indices and builds COPY rows for one session."""

    def __init__(self, session_id: Any, rng: random.Random, ids: random.Random, start: int) -> None:
        self.session_id = session_id
        self.rng = rng
        self.ids = ids
        self.index = start
        self.rows: list[tuple] = []

    def add(
        self,
        *,
        window: str,
        role: str,
        kind: str,
        content: str,
        run_id: Any = None,
        input_run: str | None = None,
        tool_call_id: str | None = None,
        tool_name: str | None = None,
        arguments: Any = None,
        is_error: bool | None = None,
        message_id: uuid.UUID | None = None,
    ) -> tuple[int, uuid.UUID]:
        message_id = message_id or _uuid(self.ids)
        self.rows.append(
            (
                message_id,
                self.session_id,
                self.index,
                window,
                role,
                kind,
                json.dumps(content),
                run_id,
                input_run,
                tool_call_id,
                tool_name,
                None if arguments is None else json.dumps(arguments, sort_keys=True),
                is_error,
                None,
                BASE_TIME + timedelta(milliseconds=self.index),
                None,  # the frame (frozen_revision, frozen_upper_bound): no call is dispatched
                None,
            )
        )
        self.index += 1
        return self.index - 1, message_id


@dataclass
class _Group:
    messages: list[tuple[int, uuid.UUID]]
    window: str


def _hidden_prefix(
    writer: _Writer, count: int, old_runs: list[uuid.UUID]
) -> tuple[list[_Group], dict[str, int]]:
    """`count` rows over all windows; returns the tool exchanges (fold candidates)."""
    rng = writer.rng
    pairs: list[_Group] = []
    first_index: dict[str, int] = {}
    end = writer.index + count
    while writer.index < end:
        window = rng.choice(WINDOWS)
        first_index.setdefault(window, writer.index)
        run = old_runs[min(len(old_runs) - 1, (writer.index - 1) * len(old_runs) // max(end, 1))]
        roll = rng.random()
        if roll < 0.004:
            writer.add(
                window=window,
                role="user",
                kind="input",
                content=f"Earlier request: {_words(rng, 12)}.",
                run_id=run,
                input_run=run.hex,
            )
        elif roll < 0.5 and writer.index + 1 < end:
            call_id = f"h{writer.index}"
            call = writer.add(
                window=window,
                role="assistant",
                kind="tool_call",
                content="",
                run_id=run,
                tool_call_id=call_id,
                tool_name="lookup",
                arguments={"q": _words(rng, 3), "page": rng.randrange(1, 9)},
            )
            result = writer.add(
                window=window,
                role="tool",
                kind="tool_result",
                content=f"lookup result: {_words(rng, rng.randrange(30, 90))}",
                run_id=run,
                tool_call_id=call_id,
                is_error=False,
            )
            pairs.append(_Group([call, result], window))
        else:
            writer.add(
                window=window,
                role="assistant",
                kind="text",
                content=f"Note: {_words(rng, rng.randrange(12, 36))}.",
                run_id=run,
            )
    return pairs, first_index


def _visible_groups(seed: int) -> list[dict[str, Any]]:
    """The active window's visible history, identical at every size."""
    rng = random.Random(f"{seed}:visible")
    groups: list[dict[str, Any]] = []
    written = 0
    k = 0
    while written < VISIBLE:
        if k % 8 == 0 or written + 2 > VISIBLE:
            groups.append({"kind": "text", "content": f"Progress {k}: {_words(rng, 30)}."})
            written += 1
        else:
            groups.append(
                {
                    "kind": "pair",
                    "call_id": f"v{k}",
                    "arguments": {"q": f"item {k}", "region": "EU"},
                    "content": json.dumps(
                        {"item": k, "rows": [_words(rng, 8) for _ in range(6)], "ok": True}
                    ),
                }
            )
            written += 2
        k += 1
    return groups


def _tail(
    writer: _Writer, run: Any, hidden_in_tail: int, seed: int
) -> tuple[list[list[tuple[int, uuid.UUID]]], dict[int, str]]:
    """W's visible groups interleaved with `hidden_in_tail` other-window texts."""
    rng = writer.rng
    groups = _visible_groups(seed)
    others = [w for w in WINDOWS if w != ACTIVE]
    slots = len(groups) + hidden_in_tail
    other_slots = set(rng.sample(range(slots), hidden_in_tail)) if hidden_in_tail else set()
    ids = writer.ids
    written: list[list[tuple[int, uuid.UUID]]] = []
    position = 0
    for slot in range(slots):
        if slot in other_slots:
            writer.add(
                window=rng.choice(others),
                role="assistant",
                kind="text",
                content=f"Note: {_words(rng, rng.randrange(12, 36))}.",
                run_id=run,
            )
            continue
        group = groups[position]
        position += 1
        if group["kind"] == "text":
            written.append(
                [
                    writer.add(
                        window=ACTIVE,
                        role="assistant",
                        kind="text",
                        content=group["content"],
                        run_id=run,
                        message_id=_uuid(ids),
                    )
                ]
            )
        else:
            call = writer.add(
                window=ACTIVE,
                role="assistant",
                kind="tool_call",
                content="",
                run_id=run,
                tool_call_id=group["call_id"],
                tool_name="lookup",
                arguments=group["arguments"],
                message_id=_uuid(ids),
            )
            result = writer.add(
                window=ACTIVE,
                role="tool",
                kind="tool_result",
                content=group["content"],
                run_id=run,
                tool_call_id=group["call_id"],
                is_error=False,
                message_id=_uuid(ids),
            )
            written.append([call, result])
    kinds = {i: g["kind"] for i, g in enumerate(groups)}
    return written, kinds


def _fold_value(window: str, messages: list[tuple[int, uuid.UUID]], summary: str) -> dict:
    return {
        "windowId": window,
        "firstIndex": messages[0][0],
        "lastIndex": messages[-1][0],
        "messageIds": [str(m[1]) for m in messages],
        "summary": summary,
        "createdAtIndex": messages[-1][0] + 1,
    }


def _state_writes(
    *,
    covered: int,
    first_index: dict[str, int],
    entry_bound: int,
    revision: int,
) -> dict[str, Any]:
    from contextproto.protocol.state import (
        KEY_ACTIVE_WINDOW,
        KEY_CURRENT_WINDOW_ENTRY,
        KEY_TASK_MEMORY,
        STATUS_ACTIVE,
        STATUS_SUSPENDED,
        checkpoint_key,
        covered_key,
        new_window_record,
        window_key,
    )

    text = random.Random(f"{SEED}:state")  # the same state text at every size
    writes: dict[str, Any] = {}
    for window in WINDOWS:
        record = new_window_record(
            goal=f"Sub-task {window}: {_words(text, 8)}",
            input=_words(text, 20),
            opened_from=None if window == "main" else "main",
            created_at_index=first_index.get(window, 0),
        )
        record["memory"] = _words(text, 40)
        record["status"] = STATUS_ACTIVE if window == ACTIVE else STATUS_SUSPENDED
        writes[window_key(window)] = record
        words = 300 if window == ACTIVE else 60
        writes[checkpoint_key(window)] = f"Checkpoint of {window}: {_words(text, words)}."
        writes[covered_key(window)] = covered
    writes[KEY_TASK_MEMORY] = f"Task memory: {_words(text, 80)}."
    writes[KEY_ACTIVE_WINDOW] = ACTIVE
    writes[KEY_CURRENT_WINDOW_ENTRY] = {
        "windowId": ACTIVE,
        "fromWindowId": "main",
        "upperBoundBeforeEntry": entry_bound,
        "input": f"Hand-off: {_words(text, 25)}.",
        "enteredAtRevision": revision + 1,
    }
    return writes


def bench_version(application_name: str, agent_name: str, **fields: Any):
    """A published unified@2 AgentVersion (built directly, as tests/conftest.py does)."""
    from agents.models import Agent, AgentVersion, Application

    application, _ = Application.objects.get_or_create(name=application_name)
    agent, _ = Agent.objects.get_or_create(application=application, name=agent_name)
    version = agent.versions.filter(status=AgentVersion.Status.PUBLISHED).first()
    if version is not None:
        return version
    return AgentVersion.objects.create(
        agent=agent,
        number=(agent.versions.count() or 0) + 1,
        status=AgentVersion.Status.PUBLISHED,
        system_prompt="You are ACME's operations agent.\n{{context_protocol}}",
        context_protocol_id=fields.pop("protocol", "unified"),
        context_protocol_version=fields.pop("protocol_version", 2),
        options=fields.pop("options", {}),
        model_provider=fields.pop("provider", "external"),
        model_name="bench-model",
        max_input_tokens=fields.pop("max_input_tokens", 32000),
        **fields,
    )


def build_session(
    version: Any, total: int, *, seed: int = SEED, nonce: str = "", analyze: bool = True
) -> Built:
    """Build one session of `total` messages with the fixed visible view; see the module doc.

    Content follows `seed`; MessageIds and RunIds follow `seed` and `nonce` (sessions built
    again and again, like the dispatch ones, pass a fresh nonce: ids are primary keys).
    """
    import time

    from django.db import transaction

    from sessions_app.models import Run, Session
    from sessions_app.services.runs import run_start
    from sessions_app.services.sessions import session_create
    from sessions_app.store.state import kv_commit

    started = time.perf_counter()
    rng = random.Random(f"{seed}:{LAYOUT}:{total}")
    ids = random.Random(f"{seed}:{LAYOUT}:{total}:ids:{nonce}")
    hidden = total - VISIBLE - 1
    if hidden < 0:
        raise ValueError(f"a session needs at least {VISIBLE + 1} messages")
    hidden_in_tail = round(hidden * TAIL_SHARE)
    prefix = hidden - hidden_in_tail
    with transaction.atomic():
        session, _key = session_create(
            agent_version=version, inputs={"customer": "ACME", "project": "benchmark"}
        )
        old_runs = [
            Run(id=_uuid(ids), session=session, status=Run.Status.COMPLETED)
            for _ in range(max(1, prefix // 1000))
        ]
        Run.objects.bulk_create(old_runs, batch_size=COPY_BATCH)
        writer = _Writer(session.id, rng, ids, start=session.next_message_index)
        pairs, first_index = _hidden_prefix(writer, prefix, [r.id for r in old_runs])
        copy_messages(writer.rows)
        writer.rows.clear()
        covered = writer.index - 1
        Session.objects.filter(pk=session.pk).update(next_message_index=writer.index)
        run, _input = run_start(
            session_id=session.id, content="Continue the ACME rollout: finish the quotes."
        )
        writer.index = _input.index + 1
        tail_groups, _kinds = _tail(writer, run.id, hidden_in_tail, seed)
        copy_messages(writer.rows)
        writer.rows.clear()
        Session.objects.filter(pk=session.pk).update(next_message_index=writer.index)
        session.refresh_from_db()

        writes = _state_writes(
            covered=covered,
            first_index=first_index,
            entry_bound=_input.index,
            revision=session.state_revision,
        )
        from contextproto.protocol.folds import fold_id_for
        from contextproto.protocol.state import fold_key

        folded: set[int] = set()
        for number, positions in enumerate(FOLDED_GROUPS):
            messages = [m for p in positions for m in tail_groups[p]]
            folded.update(positions)
            writes[fold_key(fold_id_for(f"bench-v{number}"))] = _fold_value(
                ACTIVE, messages, f"Looked up items {positions}: prices and stock noted."
            )
        wanted = min(HIDDEN_FOLDS_MAX, prefix // HIDDEN_FOLDS_PER)
        for group in rng.sample(pairs, min(wanted, len(pairs))):
            writes[fold_key(fold_id_for(f"bench-h{group.messages[0][0]}"))] = _fold_value(
                group.window, group.messages, f"Lookup {_words(rng, 6)} done."
            )
        kv_commit(session_id=session.id, writes=writes)
        free_pairs = [
            (g[0][0], g[1][0]) for p, g in enumerate(tail_groups) if len(g) == 2 and p not in folded
        ]
    if analyze:
        analyze_tables()
    return Built(
        session_id=session.id,
        total=total,
        window_id=ACTIVE,
        covered_through=covered,
        upper_bound=writer.index - 1,
        run_hex=run.id.hex,
        free_pairs=free_pairs,
        seconds=time.perf_counter() - started,
    )


def analyze_tables() -> None:
    """Vacuum and refresh planner statistics after a bulk load, as autovacuum would in time:
    rows COPYed a moment ago have no hint bits and no visibility map yet, so the first
    reads of a fresh database pay for both (the bare read measured 2.9x slower)."""
    from django.db import connection

    with connection.cursor() as cursor:
        for name in ("message", "kventry", "foldrecord", "windowrecord", "session"):
            cursor.execute(f"VACUUM (ANALYZE) sessions_app_{name}")


def describe(session: Any) -> Built:
    """The Built record of an existing benchmark session (read from its state)."""
    from contextproto.protocol.state import covered_key
    from sessions_app.reads import raw_log

    kv = raw_log.kv_values(session.id, ["activeWindow", covered_key(ACTIVE)])
    return Built(
        session_id=session.id,
        total=session.last_index,
        window_id=kv["activeWindow"],
        covered_through=int(kv[covered_key(ACTIVE)]),
        upper_bound=session.last_index,
        run_hex=session.current_run_id.hex,
        reused=True,
    )
