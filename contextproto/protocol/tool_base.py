"""What every protocol tool handler shares: the reader port, the call and its context,
the outcome, refusals and the small text helpers (contract §5).

`tools` (the dispatcher) and the handler modules `tool_folds` and `tool_windows` import
this module; it imports none of them, so the graph is one-way:
tools -> tool_folds, tool_windows -> tool_base.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from contextproto.protocol import errors, json_texts
from contextproto.protocol.catalog import ProtocolVersion
from contextproto.protocol.content_parts import is_model_reasoning, is_text_part
from contextproto.protocol.errors import ProtocolError
from contextproto.protocol.messages import Content, Fold, Frame, RawMessage
from contextproto.protocol.state import (
    KEY_ACTIVE_WINDOW,
    MAIN_WINDOW,
    initial_kv,
    window_key,
)
from contextproto.protocol.tool_results import (
    ToolResult,
    ToolSuccess,
    tool_failure,
)

PREVIEW_CHARS = 120
EFFECT_QUEUE_MAINTENANCE = "queue_maintenance"


class SessionReader(Protocol):
    """Read access to ONE session's committed state and log, implemented by the DB layer.

    Every method is bounded by its arguments (a range, a page or a list of keys),
    so no handler can make the DB side scan a whole session. The reader is
    restricted to the call's session: an id of another session is simply absent.
    """

    def kv_get_many(self, keys: Sequence[str]) -> dict[str, Any]:
        """Return the present keys only, from the current committed state."""
        ...

    def window_messages(
        self, window_id: str, after_index: int, through_index: int
    ) -> list[RawMessage]:
        """Return the window's messages with after_index < index <= through_index, by index."""
        ...

    def window_outline(
        self, window_id: str, after_index: int, through_index: int
    ) -> list[RawMessage]:
        """Like `window_messages` with content "" and arguments None: the group structure.

        For handlers that need ids, indices, kinds, roles and call ids only (fold rules);
        reading the bodies of a whole live window is most of such a call's cost.
        """
        ...

    def message_windows(self, indices: Sequence[int]) -> dict[int, str]:
        """Return index -> window id for those of `indices` that exist."""
        ...

    def messages_by_ids(self, message_ids: Sequence[str]) -> list[RawMessage]:
        """Return the messages with these ids in index order, hot and cold merged."""
        ...

    def message_at(self, index: int) -> RawMessage | None:
        """Return the message with this index, any window, hot or cold; None if there is none."""
        ...

    def fold(self, fold_id: str) -> Fold | None: ...

    def folds_of_window(self, window_id: str, offset: int, limit: int) -> list[Fold]:
        """Return a page of the window's folds by first index, compressed ones included."""
        ...

    def folds_intersecting(self, window_id: str, first_index: int, last_index: int) -> list[Fold]:
        """Return the window's folds that share at least one index with [first, last]."""
        ...

    def folds_in_range(self, window_id: str, first_index: int, last_index: int) -> list[Fold]:
        """Return the window's folds lying entirely inside [first, last]."""
        ...

    def fold_count(self) -> int:
        """Return the number of folds of the session, compressed ones included."""
        ...

    def windows(
        self, status: str | None, offset: int, limit: int
    ) -> list[tuple[str, dict[str, Any]]]:
        """Return a page of (id, record), ordered by createdAtIndex then id."""
        ...

    def window_count(self) -> int:
        """Return the number of windows of the session, `main` included."""
        ...

    def search_windows(self, query: str, limit: int) -> list[tuple[str, dict[str, Any]]]:
        """Return windows whose goal, memory, outcomes or checkpoint contain `query`.

        Case-insensitive substring match, in the order of `windows()`.
        """
        ...


@dataclass(frozen=True)
class ToolCall:
    """The raw `tool_call` record being dispatched, with the frame it acts on."""

    tool_call_id: str
    tool_name: str
    arguments: object  # as the model wrote them; validated by dispatch
    call_index: int  # MessageIndex of the tool_call message
    call_window_id: str  # window the tool_call message was written in
    # The revision and upper bound of the view the call was made from (the call itself is
    # above the bound), or of the state an MCP client saw.
    frame: Frame


@dataclass(frozen=True)
class ToolContext:
    """What the dispatcher knows besides the call: version, options, the revision now."""

    version: ProtocolVersion
    options: Mapping[str, Any]  # normalized (defaults applied)
    current_revision: int  # read under the session lock
    maintainer_bound: bool


@dataclass(frozen=True)
class ToolOutcome:
    """A handler's answer: the JSON result plus what the caller must commit and do."""

    result: ToolResult
    # key -> new JSON value; committed in ONE transaction with the receipt
    kv_writes: dict[str, Any] = field(default_factory=dict)
    # performed by the caller after the commit, e.g. ("queue_maintenance", {"windowId": W})
    effects: tuple[tuple[str, dict[str, Any]], ...] = ()

    @property
    def mutated(self) -> bool:
        return bool(self.kv_writes)

    # Read with .get: the Django layer also builds results (its own refusals) as plain dicts.
    @property
    def success(self) -> bool:
        return self.result.get("success") is True

    @property
    def error_code(self) -> str | None:
        error = self.result.get("error")
        code = error.get("code") if isinstance(error, dict) else None
        return code if isinstance(code, str) else None


class Refusal(ProtocolError):
    """A tool's own refusal; whether calling differently can fix it is its code's
    (`errors.correctable`), never the raise site's."""


@dataclass
class Invocation:
    """One validated call on its way through the handlers, with a cached activeWindow read."""

    call: ToolCall
    ctx: ToolContext
    reader: SessionReader
    args: dict[str, Any]
    _active_window: str | None = field(default=None, init=False, repr=False)

    def active_window(self) -> str:
        """Return the current `activeWindow` (`main` when the key is absent)."""
        if self._active_window is None:
            found = self.reader.kv_get_many([KEY_ACTIVE_WINDOW]).get(KEY_ACTIVE_WINDOW)
            self._active_window = found if isinstance(found, str) and found else MAIN_WINDOW
        return self._active_window

    def option(self, name: str) -> Any:
        return self.ctx.options.get(name, self.ctx.version.defaults.get(name))

    @property
    def writes_entry(self) -> bool:
        """Whether switches record `currentWindowEntry` (the versions with a state message)."""
        return self.ctx.version.state_message


Handler = Callable[[Invocation], ToolOutcome]


def error_outcome(exc: ProtocolError) -> ToolOutcome:
    """Turn a refusal into `{"success": false, "error": {code, message, correctable, ...}}`."""
    return ToolOutcome(
        result=tool_failure(
            exc.code, exc.message, correctable=errors.correctable(exc.code), details=exc.details
        )
    )


def success(
    result: ToolSuccess,
    *,
    kv_writes: dict[str, Any] | None = None,
    effects: tuple[tuple[str, dict[str, Any]], ...] = (),
) -> ToolOutcome:
    """Answer a call with `result` (its `success` is true) and what to commit and do."""
    return ToolOutcome(result=result, kv_writes=kv_writes or {}, effects=effects)


# ---------------------------------------------------------------- shared helpers


def window_not_found(window_id: str, *, argument: str = "windowId") -> Refusal:
    return Refusal(
        errors.WINDOW_NOT_FOUND,
        f"There is no window '{window_id}' in this session; use context_window_list or "
        "context_window_search to find the right id.",
        {"windowId": window_id, "argument": argument},
    )


def record_of(window_id: str, kv: Mapping[str, Any]) -> dict[str, Any]:
    """Return `window/<id>` from `kv`; `main` falls back to its initial record.

    Raises a non-correctable Refusal for any other missing record: the active
    window always has one, so its absence is an inconsistent state, not a mistake.
    """
    record = kv.get(window_key(window_id))
    if isinstance(record, dict):
        return record
    if window_id == MAIN_WINDOW:
        return dict(initial_kv()[window_key(MAIN_WINDOW)])
    raise Refusal(
        errors.WINDOW_STATE_INCONSISTENT,
        f"The active window '{window_id}' has no record; the session state is inconsistent. "
        "Report this to the operator; other tools still work.",
        {"windowId": window_id},
    )


def text_of(content: Content | object) -> str:
    """Return the readable text of a message content (images as a short marker).

    Thinking and reasoning parts are left out: a preview shows what the model said, not how
    it got there.
    """
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if is_model_reasoning(part):
                continue
            if is_text_part(part):
                parts.append(str(part.get("text", "")))
            elif isinstance(part, dict):
                parts.append(f"[{part.get('type', 'part')}]")
            else:
                parts.append(str(part))
        return " ".join(parts)
    if content is None:
        return ""
    return json_texts.canonical_compact(content)


def preview(text: str, limit: int = PREVIEW_CHARS) -> str:
    """Return `text` on one line, cut to at most `limit` characters with an ellipsis."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"
