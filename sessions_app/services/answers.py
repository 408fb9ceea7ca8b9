"""Record one model answer (contract §4.5, §5.2, §14): its text, its calls, and what the service
answers itself, in one transaction.

The one writer of a model's answer, whoever called the model (the built-in runtime, a gateway
request). An answer is written as the model gave it: the text beside its calls (and an
Anthropic answer's thinking blocks) in the first call's `content`, or a `text` message when
it made no call. Every call is recorded; the service then answers in the same transaction
what no host will: a later call of the answer that is not a protocol tool
(`single_tool_call_per_turn`), and a first call of a tool the agent does not have
(`tool_not_available`) or whose arguments fail its schema (`invalid_arguments`). Those
results name the answer's view in `snapshotId`, which a host's result never does: that is how
the transcript tells them from a client's (contextproto.protocol.gateway.transcript).
Protocol calls are left to the dispatcher; the caller dispatches them after this commits.

A call id the session already holds (providers that restart at `call_0` every answer), one
used twice in the answer, or one outside the id rule is replaced by a fresh id, which is the
one the model, the host and the client see from then on.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any
from uuid import UUID

from contextproto.errors import SINGLE_TOOL_CALL_PER_TURN, TOOL_NOT_AVAILABLE, tool_error
from contextproto.protocol import catalog, client_state
from contextproto.protocol.errors import INVALID_ARGUMENTS
from contextproto.protocol.host_tools import arguments_problem
from contextproto.protocol.host_wire import tool_call_id_problem
from contextproto.protocol.messages import (
    KIND_TEXT,
    KIND_TOOL_CALL,
    KIND_TOOL_RESULT,
    ROLE_ASSISTANT,
    ROLE_TOOL,
    Frame,
    RawMessage,
)
from contextproto.protocol.tool_results import ToolFailure
from sessions_app.models import GatewayCallId, Session
from sessions_app.reads import hot_sql
from sessions_app.reads.raw_log import call_and_answer
from sessions_app.services.messages import NewMessage, message_write_locked
from sessions_app.store.codec import raw_from_row


@dataclass(frozen=True)
class AnswerCall:
    """A call the model made: its id as the model gave it, the tool, the arguments."""

    id: str
    name: str
    arguments: Any


@dataclass(frozen=True)
class RecordedAnswer:
    """What `answer_record_locked` wrote.

    `messages` in log order (the answer, then the service's results); `protocol_calls` the
    ids of the answer's protocol calls, to dispatch in order; `handed` the one call the host
    (or the gateway's client) must run now, if any; `renamed` each replaced id → its new id.
    """

    messages: tuple[RawMessage, ...]
    protocol_calls: tuple[str, ...]
    handed: RawMessage | None
    renamed: dict[str, str] = field(default_factory=dict)

    @property
    def answer(self) -> tuple[RawMessage, ...]:
        """The answer's own messages (its text or calls), without the service's results."""
        return tuple(m for m in self.messages if m.role == ROLE_ASSISTANT)


def answer_content(text: str | None, thinking: Sequence[Mapping[str, Any]] = ()) -> Any:
    """The content of an answer's first message: its thinking blocks, then its text."""
    if not thinking:
        return text or ""
    parts = [dict(block) for block in thinking]
    if text:
        parts.append({"type": "text", "text": text})
    return parts


def _fresh_id(original: str) -> str:
    prefix = "toolu_" if original.startswith("toolu_") else "call_"
    return prefix + uuid.uuid4().hex[:24]


def minted_call_id() -> str:
    """A tool-call id unique across the service (128 random bits), for a call the gateway
    hands to its client."""
    return "call_" + uuid.uuid4().hex


def _session_ids(session: Session, calls: Sequence[AnswerCall]) -> dict[str, str]:
    """Each call's id in the log: its own, or a fresh one when the session already holds it,
    the answer used it before, or it breaks the id rule."""
    ids: dict[str, str] = {}
    taken: set[str] = set()
    for call in calls:
        new = call.id
        if (
            tool_call_id_problem(call.id) is not None
            or call.id in taken
            or call_and_answer(session.id, call.id)[0] is not None
        ):
            new = _fresh_id(call.id if isinstance(call.id, str) else "")
        taken.add(new)
        ids[call.id] = new
    return ids


def _tools_of(session: Session) -> dict[str, dict[str, Any]]:
    """The schemas of the tools a host or client runs: the version's host tools, shadowed by
    the client tools a gateway request declared (contract §14)."""
    schemas = {t.name: t.input_schema for t in session.agent_version.tools.all()}
    kv = client_state.read_client_kv(
        partial(hot_sql.kv_values, session.id), [client_state.KEY_TOOLS]
    )
    for tool in client_state.client_tools(kv):
        schemas[tool["name"]] = tool["inputSchema"]
    return schemas


def _refusal(call: AnswerCall, position: int, tools: Mapping[str, Any]) -> ToolFailure | None:
    """The service's answer to a call that no host will run, or None for the handed call."""
    if position > 0:
        return tool_error(
            SINGLE_TOOL_CALL_PER_TURN,
            "Only one tool call per turn is executed; call it again later.",
        )
    if call.name not in tools:
        return tool_error(TOOL_NOT_AVAILABLE, f"{call.name} is not a tool of this agent.")
    arguments = call.arguments
    if not isinstance(arguments, dict):
        return tool_error(
            INVALID_ARGUMENTS,
            f"{call.name}: the arguments are not a JSON object. Send them as a JSON object "
            "that matches the tool's schema and call the tool again.",
            {"path": "$"},
        )
    problem = arguments_problem(tools[call.name], arguments)
    if problem is not None:
        # The host only ever receives arguments its tool's schema allows (contract §11).
        return tool_error(
            INVALID_ARGUMENTS,
            f"{call.name}: the arguments at {problem.path} {problem.message} Fix them and "
            "call the tool again.",
            {"path": problem.path},
        )
    return None


def answer_record_locked(
    session: Session,
    *,
    snapshot_id: UUID | str,
    text: str | None,
    calls: Sequence[AnswerCall],
    thinking: Sequence[Mapping[str, Any]] = (),
    frame: Frame | None = None,
    mint_handed: bool = False,
) -> RecordedAnswer:
    """Write one model answer generated from view `snapshot_id` (module docstring), inside
    the caller's transaction, `session` locked by `session_lock`: only `turn_commit`, which
    writes the rest of the turn in the same commit, calls it. `frame`: that view's revision
    and upper bound, recorded on each call for its dispatch. Raises nothing for what the
    model got wrong: that becomes a result.

    `mint_handed`: the call handed to the client gets an id the gateway mints, unique
    across the service and recorded with its session (contract §19.1: a client that sends it
    back names its conversation by it).
    """
    first_content = answer_content(text, thinking)
    written = []
    if not calls:
        row = message_write_locked(
            session,
            NewMessage(
                role=ROLE_ASSISTANT, kind=KIND_TEXT, content=first_content, snapshot_id=snapshot_id
            ),
        )
        return RecordedAnswer(messages=(raw_from_row(row),), protocol_calls=(), handed=None)
    tools = _tools_of(session)
    refusals = [
        None if call.name in catalog.PROTOCOL_TOOL_NAMES else _refusal(call, position, tools)
        for position, call in enumerate(calls)
    ]
    ids = _session_ids(session, calls)
    if mint_handed:
        for call, refusal in zip(calls, refusals, strict=True):
            if call.name not in catalog.PROTOCOL_TOOL_NAMES and refusal is None:
                ids[call.id] = minted_call_id()
                GatewayCallId.objects.create(
                    call_id=ids[call.id], session=session, application_id=session.application_id
                )
    rows = []
    for position, call in enumerate(calls):
        rows.append(
            message_write_locked(
                session,
                NewMessage(
                    role=ROLE_ASSISTANT,
                    kind=KIND_TOOL_CALL,
                    content=first_content if position == 0 else "",
                    tool_call_id=ids[call.id],
                    tool_name=call.name,
                    arguments=call.arguments,
                    snapshot_id=snapshot_id,
                    frame=frame,
                ),
                save_session=False,
            )
        )
    written.extend(rows)
    handed = None
    protocol_calls = []
    for call, row, refusal in zip(calls, rows, refusals, strict=True):
        if call.name in catalog.PROTOCOL_TOOL_NAMES:
            protocol_calls.append(row.tool_call_id)
            continue
        if refusal is None:
            handed = row
            continue
        written.append(
            message_write_locked(
                session,
                NewMessage(
                    role=ROLE_TOOL,
                    kind=KIND_TOOL_RESULT,
                    content=json.dumps(refusal),
                    window_id=row.window_id,
                    tool_call_id=row.tool_call_id,
                    tool_name=call.name,
                    is_error=True,
                    snapshot_id=snapshot_id,
                ),
                save_session=False,
            )
        )
    session.save(update_fields=["next_message_index"])
    return RecordedAnswer(
        messages=tuple(raw_from_row(r) for r in written),
        protocol_calls=tuple(str(c) for c in protocol_calls),
        handed=raw_from_row(handed) if handed is not None else None,
        renamed={old: new for old, new in ids.items() if old != new},
    )
