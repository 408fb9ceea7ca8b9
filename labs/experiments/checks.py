"""What every experiment run is judged on (docs/architecture.md: Labs), computed from stored rows
only.

Everything here reads what the service recorded: the run's messages (hot and archived),
its projection snapshots (the provider request as sent), receipts, folds, KV and
maintenance jobs. Nothing asks the model or trusts what it said about itself.

A check has a status: `pass`, `fail`, `n/a` (not applicable to the group, or the behaviour
was not exercised in this run: nothing is claimed) or `info` (a count, never a verdict).
A run passes when no required check failed.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from contextproto.protocol import catalog
from contextproto.protocol.derived_texts import HEADER_LEAD, STATE_LEAD
from contextproto.protocol.foldtext import render_fold_text
from contextproto.protocol.messages import (
    KIND_TOOL_CALL,
    KIND_TOOL_RESULT,
    RawMessage,
    content_text,
)
from contextproto.protocol.state import KEY_TASK_MEMORY, covered_key, fold_key
from sessions_app.models import (
    FoldRecord,
    KVEntry,
    MaintenanceJob,
    ProjectionSnapshot,
    Run,
    Session,
    ToolReceipt,
)
from sessions_app.reads import raw_log
from sessions_app.store.snapshot_bodies import views_of

PASS, FAIL, NA, INFO = "pass", "fail", "n/a", "info"
WINDOW_GUARD_CODES = ("context_window_mismatch", "context_window_expectation_required")
ANSWER_PREVIEW_CHARS = 600

# Where each group's state message is designed to travel (contract §4.2): (role, position).
TRAILING, BEFORE_HISTORY, MIDDLE = "trailing", "before_history", "middle"
DESIGNED_STATE = {
    "trailing_assistant": ("assistant", TRAILING),
    "before_history_assistant": ("assistant", BEFORE_HISTORY),
    "trailing_user": ("user", TRAILING),
}


@dataclass
class Check:
    name: str
    status: str
    detail: str
    required: bool = True
    data: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "status": self.status,
            "required": self.required,
            "detail": self.detail,
            **({"data": self.data} if self.data else {}),
        }


def designed_state(
    protocol_id: str, version: int, options: dict[str, Any]
) -> tuple[str, str] | None:
    """(role, position) the group's state message should have; None without one."""
    if protocol_id != "unified" or version < 2:
        return None
    if version == 2:
        return DESIGNED_STATE["trailing_assistant"]
    # Without the option, the version's own default applies (unified@4: trailing user), as
    # the projection applies it; a fixed fallback would call a default group not comparable.
    entry = catalog.find_version(protocol_id, version)
    default = entry.defaults.get("stateMessagePlacement") if entry else None
    return DESIGNED_STATE[options.get("stateMessagePlacement") or default or "trailing_assistant"]


# --------------------------------------------------------------------------- run facts


@dataclass
class RunFacts:
    """The stored record of one finished run."""

    session: Session
    run: Run
    messages: list[RawMessage]  # the run's messages, index order
    snapshots: list[ProjectionSnapshot]
    receipts: dict[str, ToolReceipt]  # by toolCallId

    @property
    def answer(self) -> RawMessage | None:
        texts = [m for m in self.messages if m.role == "assistant" and m.kind == "text"]
        return texts[-1] if texts and self.run.status == Run.Status.COMPLETED else None

    @property
    def answer_text(self) -> str:
        answer = self.answer
        return content_text(answer.content, text_only=True) if answer is not None else ""

    @property
    def calls(self) -> list[RawMessage]:
        return [m for m in self.messages if m.kind == KIND_TOOL_CALL]


def run_facts(session: Session, run: Run) -> RunFacts:
    """Load one run's messages (hot and cold merged), snapshots and receipts."""
    run.refresh_from_db()
    session.refresh_from_db()
    log = raw_log.log_page(session.id, window_id=None, after_index=0, limit=session.last_index)
    messages = [m for m in log if m.run_id == run.id.hex]
    snapshots = list(
        ProjectionSnapshot.objects.filter(session=session, run=run).order_by("created_at", "id")
    )
    views_of(snapshots)
    call_ids = [m.tool_call_id for m in messages if m.kind == KIND_TOOL_CALL and m.tool_call_id]
    receipts = {
        r.tool_call_id: r
        for r in ToolReceipt.objects.filter(session=session, tool_call_id__in=call_ids)
    }
    return RunFacts(session, run, messages, snapshots, receipts)


# --------------------------------------------------------------------------- state message


def _request_blocks(request: Any) -> list[tuple[str, str]]:
    """(role, text) of every content block of the request after the system prompt."""
    blocks: list[tuple[str, str]] = []
    messages = request.get("messages") if isinstance(request, dict) else None
    for message in messages if isinstance(messages, list) else []:
        if not isinstance(message, dict) or message.get("role") == "system":
            continue
        role, content = str(message.get("role")), message.get("content")
        if isinstance(content, str):
            blocks.append((role, content))
        elif isinstance(content, list):
            for block in content:
                if isinstance(block, dict) and block.get("type") == "text":
                    blocks.append((role, str(block.get("text", ""))))
                else:
                    blocks.append((role, json.dumps(block, sort_keys=True)))
        if message.get("tool_calls"):  # openai-chat: calls travel beside the content
            blocks.append((role, json.dumps(message["tool_calls"], sort_keys=True)))
    return blocks


def locate_state(request: Any) -> dict[str, Any] | None:
    """Where the state message travels in a provider request as sent; None if absent.

    Works on all three wire formats: blocks are found by the state text's fixed lead, so a
    merged Anthropic turn or a re-roled message is located as it was actually sent.
    """
    blocks = _request_blocks(request)
    at = next((i for i, (_, text) in enumerate(blocks) if STATE_LEAD in text), None)
    if at is None:
        return None
    history = [
        i
        for i, (_, text) in enumerate(blocks)
        if i != at and HEADER_LEAD not in text and STATE_LEAD not in text
    ]
    if at == len(blocks) - 1:
        position = TRAILING
    elif not history or at < history[0]:
        position = BEFORE_HISTORY
    else:
        position = MIDDLE
    return {"role": blocks[at][0], "position": position, "block": at, "blocks": len(blocks)}


def check_state_message(facts: RunFacts, designed: tuple[str, str] | None) -> Check:
    """The state message reached every provider request of the run: where, with which role."""
    if designed is None:
        found = sum(1 for s in facts.snapshots if locate_state(s.request) is not None)
        status = FAIL if found else NA
        return Check(
            "stateMessage",
            status,
            "the protocol has no state message"
            + (f", but {found} request(s) carried one" if found else ""),
        )
    turns: list[dict[str, Any]] = []
    for snapshot in facts.snapshots:
        located = locate_state(snapshot.request)
        neutral = next(
            (i for i, m in enumerate(snapshot.messages) if m.get("kind") == "context_state"),
            None,
        )
        turns.append(
            {
                "snapshotId": str(snapshot.id),
                "viewIndex": neutral,
                "sent": located,
                "notes": list(snapshot.notes or []),
            }
        )
    missing = [t["snapshotId"] for t in turns if t["sent"] is None]
    observed = sorted({(t["sent"]["role"], t["sent"]["position"]) for t in turns if t["sent"]})
    notes = sorted({n for t in turns for n in t["notes"]})
    data = {
        "turns": len(turns),
        "designed": {"role": designed[0], "position": designed[1]},
        "observed": [{"role": r, "position": p} for r, p in observed],
        "asDesigned": bool(observed) and observed == [designed],
        "adapterNotes": notes,
        "perTurn": turns,
    }
    if not turns:
        return Check("stateMessage", NA, "no model call in this run", data=data)
    if missing:
        return Check(
            "stateMessage",
            FAIL,
            f"{len(missing)} of {len(turns)} provider request(s) lack the state message",
            data={**data, "missingIn": missing},
        )
    sent = ", ".join(f"{r}/{p}" for r, p in observed)
    return Check(
        "stateMessage",
        PASS,
        f"in all {len(turns)} request(s), sent as {sent}"
        + ("" if data["asDesigned"] else f" (designed {designed[0]}/{designed[1]})"),
        data=data,
    )


# --------------------------------------------------------------------------- behaviour


def check_wrong_window_writes(facts: RunFacts) -> Check:
    """Wrong-window writes were refused and the model went on to finish the run."""
    refused = []
    for call in facts.calls:
        receipt = facts.receipts.get(call.tool_call_id or "")
        error = (receipt.result or {}).get("error") if receipt is not None else None
        if isinstance(error, dict) and error.get("code") in WINDOW_GUARD_CODES:
            result_index = next(
                (
                    m.index
                    for m in facts.messages
                    if m.kind == KIND_TOOL_RESULT and m.tool_call_id == call.tool_call_id
                ),
                call.index,
            )
            later = [m for m in facts.messages if m.index > result_index and m.role == "assistant"]
            refused.append(
                {
                    "toolCallId": call.tool_call_id,
                    "tool": call.tool_name,
                    "code": error["code"],
                    "expectedWindowId": _arguments_of(call).get("expectedWindowId"),
                    "currentWindowId": error.get("currentWindowId"),
                    "modelContinued": bool(later),
                }
            )
    if not refused:
        return Check("wrongWindowWrites", NA, "no wrong-window write attempted in this run")
    stuck = [r for r in refused if not r["modelContinued"]]
    completed = facts.run.status == Run.Status.COMPLETED
    status = PASS if not stuck and completed else FAIL
    detail = f"{len(refused)} refused; the model " + (
        "continued and finished the run"
        if status == PASS
        else "did not continue after a refusal"
        if stuck
        else f"continued but the run ended {facts.run.status}"
    )
    return Check("wrongWindowWrites", status, detail, data={"refused": refused})


def check_read_back(facts: RunFacts) -> Check:
    """Folds (compressed ones too) and compressed history read back as raw text."""
    session = facts.session
    folds = list(FoldRecord.objects.filter(session=session).order_by("first_index"))
    kv = raw_log.kv_values(session.id, [fold_key(f.fold_id) for f in folds])
    covered_rows = dict(
        KVEntry.objects.filter(session=session, key__startswith="coveredThrough/").values_list(
            "key", "value"
        )
    )
    problems: list[str] = []
    fold_rows = []
    for fold in folds:
        ids = list((kv.get(fold_key(fold.fold_id)) or {}).get("messageIds") or [])
        found = raw_log.log_by_ids(session.id, ids)
        text = render_fold_text(found) if found else ""
        covered = int(covered_rows.get(covered_key(fold.window_id)) or 0)
        compressed = fold.last_index <= covered
        if not ids or len(found) != len(ids) or not text:
            problems.append(
                f"fold {fold.fold_id}: {len(found)} of {len(ids)} raw messages readable"
            )
        fold_rows.append(
            {
                "foldId": fold.fold_id,
                "windowId": fold.window_id,
                "range": [fold.first_index, fold.last_index],
                "compressed": compressed,
                "messages": len(ids),
                "readable": len(found),
            }
        )
    windows = {}
    for key, value in covered_rows.items():
        covered = int(value or 0)
        if covered <= 0:
            continue
        window_id = key.split("/", 1)[1]
        readable = raw_log.log_window(session.id, window_id, 0, covered)
        windows[window_id] = {"coveredThrough": covered, "readableRawMessages": len(readable)}
        if not readable:
            problems.append(f"window {window_id}: nothing readable at or below #{covered}")
    reads = []
    for call in facts.calls:
        if call.tool_name == "context_fold_read":
            receipt = facts.receipts.get(call.tool_call_id or "")
            ok = bool(receipt and receipt.success)
            reads.append({"toolCallId": call.tool_call_id, "success": ok})
            if not ok:
                problems.append(f"context_fold_read {call.tool_call_id} failed")
    jobs = Counter(MaintenanceJob.objects.filter(session=session).values_list("status", flat=True))
    data = {
        "folds": fold_rows,
        "compressedWindows": windows,
        "foldReadCalls": reads,
        "maintenanceJobs": dict(jobs),
    }
    if not folds and not windows and not reads:
        return Check(
            "readBack",
            NA,
            "no fold and no compression in this session so far: nothing is claimed about "
            "read-back or automatic compression",
            data=data,
        )
    if problems:
        return Check("readBack", FAIL, "; ".join(problems), data=data)
    compressed_folds = sum(1 for f in fold_rows if f["compressed"])
    return Check(
        "readBack",
        PASS,
        f"{len(fold_rows)} fold(s) ({compressed_folds} compressed) and {len(windows)} compressed "
        f"window(s) read back; {len(reads)} context_fold_read call(s) succeeded",
        data=data,
    )


def _arguments_of(call: RawMessage) -> dict[str, Any]:
    """A call's arguments as an object; {} for text that is none (contract §5.2)."""
    return call.arguments if isinstance(call.arguments, dict) else {}


def check_repeated_calls(facts: RunFacts) -> Check:
    """Identical tool calls (same tool, same arguments apart from `purpose`) in the run."""
    keys = Counter(
        (
            call.tool_name,
            json.dumps(
                {k: v for k, v in _arguments_of(call).items() if k != "purpose"}
                if isinstance(call.arguments, dict)
                else call.arguments,
                sort_keys=True,
            ),
        )
        for call in facts.calls
    )
    repeats = {f"{name} {args}": n for (name, args), n in keys.items() if n > 1}
    extra = sum(n - 1 for n in repeats.values())
    return Check(
        "repeatedToolCalls",
        INFO,
        f"{extra} repeated identical call(s) of {len(facts.calls)}",
        required=False,
        data={"repeated": extra, "calls": len(facts.calls), "byCall": repeats},
    )


def check_completed(facts: RunFacts) -> Check:
    run = facts.run
    if run.status == Run.Status.COMPLETED:
        return Check("runCompleted", PASS, f"completed in {run.turns} turn(s)")
    error = run.error or {}
    return Check(
        "runCompleted",
        FAIL,
        f"ended {run.status} after {run.turns} turn(s)"
        + (f": {error.get('code')}: {error.get('message')}" if error else ""),
        data={"error": error} if error else {},
    )


# --------------------------------------------------------------------------- plan checks


def memory_slots(session: Session) -> dict[str, str]:
    """Every memory the agent can write: taskMemory and each window's working memory."""
    slots = {}
    for key, value in KVEntry.objects.filter(session=session).values_list("key", "value"):
        if key == KEY_TASK_MEMORY and isinstance(value, str):
            slots[key] = value
        elif key.startswith("window/") and isinstance(value, dict):
            memory = value.get("memory")
            if isinstance(memory, str) and memory:
                slots[f"{key}.memory"] = memory
    return slots


def _texts(value: Any) -> list[str]:
    return [value] if isinstance(value, str) else list(value)


def _matches(haystack: str, needles: list[str], ignore_case: bool) -> list[str]:
    if ignore_case:
        return [n for n in needles if n.lower() in haystack.lower()]
    return [n for n in needles if n in haystack]


_MISSING = object()


def json_path(value: Any, path: str) -> Any:
    """Resolve the `$`, `$.a.b`, `$.list[0]` subset of JSONPath; _MISSING when absent."""
    rest = path[1:]
    while rest:
        if rest.startswith("["):
            end = rest.index("]")
            n = int(rest[1:end])
            rest = rest[end + 1 :]
            if not isinstance(value, list) or n >= len(value):
                return _MISSING
            value = value[n]
        else:
            rest = rest[1:]
            cut = min([i for i in (rest.find("."), rest.find("[")) if i >= 0] or [len(rest)])
            name, rest = rest[:cut], rest[cut:]
            if not isinstance(value, dict) or name not in value:
                return _MISSING
            value = value[name]
    return value


def plan_check(
    spec: dict[str, Any],
    facts: RunFacts,
    *,
    group_id: str,
    memories_after: dict[int, dict[str, str]],
) -> Check:
    """Evaluate one `expect` entry of the plan for this run."""
    kind = spec["type"]
    required = spec.get("required", True)
    name = f"expect.{kind}"
    applies = spec.get("appliesTo")
    if applies and group_id not in applies:
        return Check(name, NA, f"not applicable to group {group_id}", required=required)
    if kind in ("contains", "notContains"):
        needles = _texts(spec["text"])
        if facts.answer is None:
            return Check(name, FAIL, "the run gave no final answer", required=required)
        hits = _matches(facts.answer_text, needles, spec.get("ignoreCase", False))
        ok = bool(hits) if kind == "contains" else not hits
        detail = f"answer contains {hits[0]!r}" if hits else f"answer contains none of {needles!r}"
        return Check(name, PASS if ok else FAIL, detail, required=required)
    if kind == "kvEquals":
        path = spec.get("path", "$")
        stored = raw_log.kv_values(facts.session.id, [spec["key"]])
        value = json_path(stored[spec["key"]], path) if spec["key"] in stored else _MISSING
        seen = "absent" if value is _MISSING else json.dumps(value, ensure_ascii=False)
        ok = value is not _MISSING and value == spec["equals"]
        return Check(
            name,
            PASS if ok else FAIL,
            f"{spec['key']} {path} is {seen}"
            + ("" if ok else f", expected {json.dumps(spec['equals'], ensure_ascii=False)}"),
            required=required,
        )
    if kind == "memoryKept":
        needles = _texts(spec["text"])
        before = memories_after.get(spec["sinceRun"], {})
        holding = {k: v for k, v in before.items() if _matches(v, needles, True)}
        if not holding:
            return Check(
                name,
                NA,
                f"no memory held {needles[0]!r} after run {spec['sinceRun']}: nothing to keep",
                required=required,
            )
        now = memory_slots(facts.session)
        lost = [k for k in holding if not _matches(now.get(k, ""), needles, True)]
        detail = (
            f"{', '.join(holding)} still hold(s) it"
            if not lost
            else f"overwritten: {', '.join(lost)} no longer hold(s) {needles[0]!r}"
        )
        return Check(
            name,
            FAIL if lost else PASS,
            detail,
            required=required,
            data={"before": holding, "now": {k: now.get(k) for k in holding}},
        )
    if kind == "toolResultBeforeAnswer":
        tool = spec["tool"]
        answer = facts.answer
        calls = {m.tool_call_id for m in facts.calls if m.tool_name == tool}
        results = [
            m
            for m in facts.messages
            if m.kind == KIND_TOOL_RESULT
            and m.tool_call_id in calls
            and answer is not None
            and m.index < answer.index
        ]
        ok = bool(results)
        return Check(
            name,
            PASS if ok else FAIL,
            f"answered after {len(results)} {tool} result(s)"
            if ok
            else f"no {tool} result before the final answer ({len(calls)} call(s))",
            required=required,
        )
    raise ValueError(f"unknown check type {kind!r}")  # the schema refuses it first


def verdict(checks: list[Check]) -> str:
    """`pass` unless a required check failed."""
    return FAIL if any(c.required and c.status == FAIL for c in checks) else PASS


def answer_preview(facts: RunFacts) -> str | None:
    if facts.answer is None:
        return None
    text = facts.answer_text
    return text if len(text) <= ANSWER_PREVIEW_CHARS else text[:ANSWER_PREVIEW_CHARS] + "…"
