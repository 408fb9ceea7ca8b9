"""Build raw message logs and projection inputs for engine tests, the way a session writes them.

Indices are gapless from 1, ids are `m<index>`, and a tool result takes the
window of its call (contract §2.3), so tests read like the conversation they model.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from contextproto.protocol import catalog
from contextproto.protocol.folds import make_fold
from contextproto.protocol.messages import (
    KIND_APPROVAL_FEEDBACK,
    KIND_INPUT,
    KIND_RUNTIME_INSTRUCTION,
    KIND_TEXT,
    KIND_TOOL_CALL,
    KIND_TOOL_RESULT,
    ROLE_ASSISTANT,
    ROLE_TOOL,
    ROLE_USER,
    Fold,
    RawMessage,
)
from contextproto.protocol.projection import ProjectionInput
from contextproto.protocol.state import (
    KEY_ACTIVE_WINDOW,
    checkpoint_key,
    covered_key,
    new_window_record,
    window_key,
)
from contextproto.protocol.view_plan import view_plan

RUN_1 = "1" * 32
RUN_2 = "2" * 32

DEFAULT_OPTIONS = {
    1: {
        "guiProjection": True,
        "pageSize": 200,
        "checkpointMaxCharacters": 12000,
        "maxWindows": 128,
        "maxFolds": 1024,
    },
    2: {
        "guiProjection": True,
        "pageSize": 200,
        "checkpointMaxCharacters": 3000,
        "maxWindows": 128,
        "maxFolds": 1024,
    },
    3: {
        "guiProjection": True,
        "pageSize": 200,
        "checkpointMaxCharacters": 3000,
        "maxWindows": 128,
        "maxFolds": 1024,
        "stateMessagePlacement": "trailing_assistant",
    },
    4: {
        "guiProjection": True,
        "pageSize": 200,
        "checkpointMaxCharacters": 3000,
        "maxWindows": 128,
        "maxFolds": 1024,
        "stateMessagePlacement": "trailing_user",
        "maskKeepRecent": 6,
        "maskMinChars": 1000,
        "maskStep": 10,
    },
}
PREFIX_OPTIONS = {"guiProjection": True, "pageSize": 200, "checkpointMaxCharacters": 12000}


@dataclass
class LogBuilder:
    """An append-only log; `window` is the active window new messages are tagged with."""

    window: str = "main"
    run: str | None = RUN_1
    messages: list[RawMessage] = field(default_factory=list)
    _call_windows: dict[str, str] = field(default_factory=dict)
    _calls: int = 0

    def _add(self, *, window: str | None = None, **fields: Any) -> RawMessage:
        index = len(self.messages) + 1
        message = RawMessage(
            id=f"m{index}", index=index, window_id=window or self.window, run_id=self.run, **fields
        )
        self.messages.append(message)
        return message

    def switch(self, window: str) -> LogBuilder:
        self.window = window
        return self

    def input(self, text: Any = "hello", *, run: str | None = None) -> RawMessage:
        run = run or self.run
        return self._add(role=ROLE_USER, kind=KIND_INPUT, content=text, input_run=run)

    def text(self, text: Any = "thinking") -> RawMessage:
        return self._add(role=ROLE_ASSISTANT, kind=KIND_TEXT, content=text)

    def instruction(self, text: str = "runtime says") -> RawMessage:
        return self._add(role=ROLE_USER, kind=KIND_RUNTIME_INSTRUCTION, content=text)

    def approval(self, call_id: str, text: str = "approved") -> RawMessage:
        return self._add(
            role=ROLE_USER, kind=KIND_APPROVAL_FEEDBACK, content=text, tool_call_id=call_id
        )

    def call(
        self,
        name: str = "search",
        arguments: dict | None = None,
        *,
        call_id: str | None = None,
        content: Any = "",
    ) -> str:
        """Append a tool_call; `content` is what the model wrote beside it (text, thinking)."""
        self._calls += 1
        call_id = call_id or f"call_{self._calls}"
        self._call_windows[call_id] = self.window
        self._add(
            role=ROLE_ASSISTANT,
            kind=KIND_TOOL_CALL,
            content=content,
            tool_call_id=call_id,
            tool_name=name,
            arguments=arguments if arguments is not None else {"q": "x"},
            snapshot_id="snap",
        )
        return call_id

    def result(
        self,
        call_id: str,
        content: Any = "ok",
        *,
        is_error: bool = False,
        window: str | None = None,
        name: str | None = None,
    ) -> RawMessage:
        # A result carries its call's window whatever window is active now.
        window = window or self._call_windows.get(call_id, self.window)
        return self._add(
            role=ROLE_TOOL,
            kind=KIND_TOOL_RESULT,
            content=content,
            tool_call_id=call_id,
            is_error=is_error,
            window=window,
            tool_name=name,
        )

    def exchange(self, name: str = "search", content: Any = "ok") -> tuple[int, int]:
        """Append a call and its result; return their indices."""
        call_id = self.call(name)
        result = self.result(call_id, content)
        return result.index - 1, result.index

    # ------------------------------------------------------------------ reads

    def at(self, index: int) -> RawMessage:
        return self.messages[index - 1]

    def of_window(
        self, window: str, *, after: int = 0, through: int | None = None
    ) -> list[RawMessage]:
        through = len(self.messages) if through is None else through
        return [m for m in self.messages if m.window_id == window and after < m.index <= through]

    def run_inputs(self, run: str | None, *, through: int | None = None) -> list[RawMessage]:
        through = len(self.messages) if through is None else through
        return [
            m
            for m in self.messages
            if m.kind == KIND_INPUT and m.input_run == run and m.index <= through
        ]

    def endpoint_windows(self, *indices: int) -> dict[int, str | None]:
        return {
            i: (self.at(i).window_id if 1 <= i <= len(self.messages) else None) for i in indices
        }

    def fold(
        self,
        window: str,
        first: int,
        last: int,
        summary: str = "did the search",
        *,
        call_id: str | None = None,
    ) -> Fold:
        messages = [m for m in self.of_window(window) if first <= m.index <= last]
        return make_fold(
            tool_call_id=call_id or f"fold-{window}-{first}-{last}",
            window_id=window,
            messages=messages,
            summary=summary,
            created_at_index=last + 1,
        )


def make_input(
    log: LogBuilder,
    *,
    window: str = "main",
    version: int = 2,
    protocol_id: str = "unified",
    covered: int = 0,
    folds: list[Fold] | tuple[Fold, ...] = (),
    run_id: str | None = RUN_1,
    upper_bound: int | None = None,
    kv: dict[str, Any] | None = None,
    options: dict[str, Any] | None = None,
    revision: int = 7,
    preview_chars: int = 16000,
    session_inputs: Any = None,
    system_prompt: str = "You are an agent.\n{{context_protocol}}",
    protocol_prompt: str = "PROTOCOL PROMPT",
    max_input_tokens: int | None = None,
    trigger_tokens: int | None = None,
    maintenance_pending: bool = False,
    tool_tokens: int = 0,
) -> ProjectionInput:
    """Build the ProjectionInput the DB layer would load for the active `window`."""
    bound = len(log.messages) if upper_bound is None else upper_bound
    state: dict[str, Any] = {
        KEY_ACTIVE_WINDOW: window,
        window_key(window): new_window_record(goal=f"goal of {window}"),
        covered_key(window): covered,
    }
    if covered:
        state[checkpoint_key(window)] = f"checkpoint of {window}"
    state.update(kv or {})
    base = PREFIX_OPTIONS if protocol_id == "prefix" else DEFAULT_OPTIONS[version]
    # The catalog entry with the test's protocol prompt, planned as a live turn plans it.
    entry = dataclasses.replace(catalog.get_version(protocol_id, version), prompt=protocol_prompt)
    plan = view_plan(
        entry, active_window=window, run_id=run_id, upper_bound=bound, revision=revision
    )
    return ProjectionInput(
        plan=plan,
        reads=plan.reads(covered),
        options={**base, **(options or {})},
        system_prompt=system_prompt,
        session_id="s1",
        session_inputs=session_inputs if session_inputs is not None else {"customer": "ACME"},
        kv=state,
        window_messages=log.of_window(window, after=covered, through=bound),
        run_inputs=log.run_inputs(run_id, through=bound) if run_id else [],
        folds=[f for f in folds if f.window_id == window and f.first_index > covered],
        tool_result_preview_chars=preview_chars,
        max_input_tokens=max_input_tokens,
        trigger_tokens=trigger_tokens,
        maintenance_pending=maintenance_pending,
        tool_tokens=tool_tokens,
    )
