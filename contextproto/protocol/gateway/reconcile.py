"""Reconciliation (contract §14): which of a request's messages are new to the session.

A client may resend the whole conversation, drop old messages from the front, or send only
what is new; it may also send a request again because it lost the reply. `reconcile`
compares the request's messages M (system text aside, as transcript items) with the tail of
the session's transcript T, in this order:

1. a retry: M is a non-empty tail of the transcript as it stood before the gateway's last
   reply → send that reply again, no model call;
2. otherwise the largest k with M[0:k] equal to the last k items of T: M[k:] is new;
3. new items may be user messages and the results of the pending client calls; an assistant
   message only while the log is empty (importing a conversation);
4. nothing new: when T ends with the client's own message (the last request failed before
   any reply) the turn is run again, otherwise the request is refused.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from contextproto.protocol.errors import (
    GATEWAY_NOTHING_NEW,
    GATEWAY_TRANSCRIPT_MISMATCH,
    TOOL_CALL_PENDING,
)
from contextproto.protocol.gateway.transcript import Item
from contextproto.protocol.messages import ROLE_ASSISTANT, ROLE_TOOL

PREVIEW = 60
# Bound on the comparisons spent looking for where a refused request left the transcript
# (only the message's wording depends on it).
DIAGNOSIS_BUDGET = 200_000


@dataclass(frozen=True)
class Replay:
    """The request is the one the last reply answered: that reply goes out again."""


@dataclass(frozen=True)
class Proceed:
    """Write `new` (in order) and run turns.

    `importing`: the log was empty, so `new` may hold assistant messages (a conversation
    brought in whole). `again`: nothing is new and the transcript ends with the client's own
    message; the last request failed before any reply, so its turn runs again.
    """

    new: tuple[Item, ...]
    importing: bool = False
    again: bool = False


@dataclass(frozen=True)
class Refusal:
    """A request that does not continue the session: `index` is the position, in the
    request's own messages, of the first message that cannot be taken."""

    code: str
    message: str
    index: int
    reason: str
    tool_call_id: str | None = None


Outcome = Replay | Proceed | Refusal


def overlap(client: Sequence[Item], transcript: Sequence[Item]) -> int:
    """The largest k with client[0:k] equal to the last k items of `transcript`.

    The prefix function of client + separator + the transcript's last len(client) items:
    linear, where trying every k would be quadratic in a resent conversation's length.
    """
    if not client or not transcript:
        return 0
    tail = transcript[-len(client) :]
    separator = object()
    keys: list[object] = [i.key for i in client] + [separator] + [i.key for i in tail]
    border = [0] * len(keys)
    for position in range(1, len(keys)):
        k = border[position - 1]
        while k and keys[position] != keys[k]:
            k = border[k - 1]
        if keys[position] == keys[k]:
            k += 1
        border[position] = k
    return border[-1]


def reconcile(
    client: Sequence[Item],
    transcript: Sequence[Item],
    *,
    before_reply: Sequence[Item] | None,
    log_empty: bool,
    pending_calls: Sequence[str],
) -> Outcome:
    """Decide what a request's messages `client` mean for the session (module docstring).

    `transcript` holds at least the last len(client) items of T (or all of them);
    `before_reply` the same of T as it stood before the gateway's last reply, or None when
    the session has no such reply to repeat; `pending_calls` the client calls of T's last
    reply still waiting for their results.
    """
    if before_reply is not None and client and len(client) <= len(before_reply):
        if [i.key for i in client] == [i.key for i in before_reply[-len(client) :]]:
            return Replay()
    if log_empty:
        return _import(client)
    k = overlap(client, transcript)
    new = tuple(client[k:])
    if not new:
        if transcript and transcript[-1].role != ROLE_ASSISTANT:
            return Proceed(new=(), again=True)
        last = client[-1].position if client else 0
        return Refusal(
            GATEWAY_NOTHING_NEW,
            "The request brings nothing new: its messages end with the session's last reply. "
            "Append the next user message (or the result of the pending tool call).",
            index=last,
            reason="nothing after the last reply",
        )
    pending = list(pending_calls)
    for item in new:
        if item.role == ROLE_ASSISTANT:
            reason = "an assistant message the session did not send"
            hint = _diagnosis(client, transcript)
            return _mismatch(item.position, reason + (f" ({hint})" if hint else ""))
        if item.role == ROLE_TOOL:
            if item.call_id not in pending:
                waiting = ", ".join(pending) or "none"
                return _mismatch(
                    item.position,
                    f"a result for tool call {item.call_id!r}, which is not waiting for a "
                    f"result (waiting: {waiting})",
                )
            pending.remove(str(item.call_id))
        elif pending:
            return _pending(item.position, pending[0])
    if pending and len(pending) < len(pending_calls):
        # Some results came, not all: no turn can run until every call is answered.
        return _pending(new[-1].position, pending[0])
    return Proceed(new=new)


def _import(client: Sequence[Item]) -> Outcome:
    """Check a conversation brought into an empty session: results follow their calls, and it
    ends with something to answer."""
    if not client:
        return Refusal(
            GATEWAY_NOTHING_NEW,
            "The request has no messages; send at least one user message.",
            index=0,
            reason="no messages",
        )
    open_calls: list[str] = []
    seen: set[str] = set()
    for item in client:
        if item.role == ROLE_ASSISTANT:
            for call in item.calls:
                if call.id in seen:
                    return _mismatch(item.position, f"tool call id {call.id!r} is used twice")
                seen.add(call.id)
                open_calls.append(call.id)
        elif item.role == ROLE_TOOL:
            if item.call_id not in open_calls:
                return _mismatch(
                    item.position,
                    f"a result for tool call {item.call_id!r}, which no earlier assistant "
                    "message of the request made or which already has its result",
                )
            open_calls.remove(str(item.call_id))
        elif open_calls:
            return _mismatch(
                item.position,
                f"a user message while tool call {open_calls[0]!r} of an earlier assistant "
                "message has no result",
            )
    if client[-1].role == ROLE_ASSISTANT:
        return Refusal(
            GATEWAY_NOTHING_NEW,
            "The conversation ends with an assistant message: there is nothing for the model "
            "to answer. Send it with the next user message (or the pending tool results).",
            index=client[-1].position,
            reason="the conversation ends with an assistant message",
        )
    return Proceed(new=tuple(client), importing=True)


def _mismatch(index: int, reason: str) -> Refusal:
    return Refusal(
        GATEWAY_TRANSCRIPT_MISMATCH,
        f"messages[{index}] does not continue this session's conversation: {reason}. Send "
        "the conversation as the session has it (all of it, its most recent part, or only the "
        "new messages).",
        index=index,
        reason=reason,
    )


def _pending(index: int, call_id: str) -> Refusal:
    return Refusal(
        TOOL_CALL_PENDING,
        f"Tool call {call_id!r} is waiting for its result: send the result of that call "
        "(a tool message / tool_result block) before a new user message.",
        index=index,
        reason=f"tool call {call_id} has no result yet",
        tool_call_id=call_id,
    )


def _diagnosis(client: Sequence[Item], transcript: Sequence[Item]) -> str | None:
    """Where the request's messages leave the transcript, when a prefix of them is in it."""
    if not client or not transcript:
        return None
    best, best_start, spent = 0, 0, 0
    first = client[0].key
    for start, item in enumerate(transcript):
        if item.key != first:
            continue
        run = 1
        while (
            run < len(client)
            and start + run < len(transcript)
            and client[run].key == transcript[start + run].key
        ):
            run += 1
        spent += run
        if run > best:
            best, best_start = run, start
        if spent > DIAGNOSIS_BUDGET:
            break
    if best == 0 or best >= len(client) or best_start + best >= len(transcript):
        return None
    ours, theirs = transcript[best_start + best], client[best]
    return (
        f"messages[{theirs.position}] differs from the session's message: {describe(ours, theirs)}"
    )


def describe(ours: Item, theirs: Item) -> str:
    """What differs between the session's item and the request's."""
    if ours.role != theirs.role:
        return f"the session has a {ours.role} message there, the request a {theirs.role} one"
    if ours.role == ROLE_ASSISTANT:
        if ours.text != theirs.text:
            return f"text {_short(theirs.text)} instead of {_short(ours.text)}"
        return "its tool calls (ids, names or arguments) differ"
    if ours.role == ROLE_TOOL and ours.call_id != theirs.call_id:
        return f"a result for {theirs.call_id!r} instead of {ours.call_id!r}"
    return f"content {_short(theirs.text)} instead of {_short(ours.text)}"


def _short(text: str) -> str:
    return repr(text if len(text) <= PREVIEW else text[: PREVIEW - 1] + "…")
