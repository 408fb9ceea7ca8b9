"""What users would switch on instead of a context protocol: the providers' own strategies.

Pure functions over a naive agent's view (the system prompt, then every raw message, as
`stored_views.full_history_projection` builds it), each a model of a provider's documented
rule, so the same agent's turns can be replayed through the cache simulator with the
provider's edit applied. Rules and defaults, as documented when this was written (December
2026; docs/decisions.md names the pages and the readings taken where they are silent):

* Anthropic context editing, `clear_tool_uses_20250919` (beta `context-management-2025-06-27`),
  applied server-side to each request before the model sees it; the client keeps sending the
  full history. `trigger` (default 100,000 input tokens; or a count of tool uses): once the
  prompt exceeds it, the oldest tool results are cleared, replaced by a placeholder, keeping
  the most recent `keep` tool uses (default 3); `clear_at_least` (default none): when fewer
  tokens than that can be cleared, nothing is; `exclude_tools`: tools whose uses are never
  cleared; `clear_tool_inputs` (default false): also clear the calls' parameters. The API is
  stateless, so every request over the trigger is edited again, the newest result past the
  kept ones joining the cleared.
* Anthropic compaction, `compact_20260112` (beta `compact-2026-01-12`): when a request's
  input tokens reach `trigger` (default 150,000; at least 50,000), the API first samples a
  summary of the conversation (an extra call, billed: `usage.iterations`), puts it in a
  `compaction` block at the start of the answer and answers from system, tools and the
  summary; later requests drop every block before the `compaction` block. The summary is
  written by the request's own model.
* OpenAI Agents SDK `ToolOutputTrimmer` (`agents.extensions`, a `call_model_input_filter`):
  before each model call, the items before the `recent_turns`-th user message from the end
  (default 2) keep their place, but each tool output longer than `max_output_chars` (default
  500) becomes `[Trimmed: <tool> output — <n> chars → <p> char preview]` + newline + its
  first `preview_chars` (default 200) characters + `...`, unless that is not shorter.

None of them keeps what it cleared readable to the model: a placeholder, a summary or a
200-character preview is all that is left. Token figures come from the injected counter.
`strategies.py` replays them over the naive agent's turns for the cache report.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from contextproto.protocol.messages import (
    KIND_INPUT,
    KIND_TEXT,
    KIND_TOOL_CALL,
    KIND_TOOL_RESULT,
    ROLE_ASSISTANT,
    ROLE_USER,
    ModelMessage,
)

# Anthropic does not document the placeholder's text; LangChain's mirror of the strategy
# (ClearToolUsesEdit) writes this one.
CLEARED_PLACEHOLDER = "[cleared]"
ANTHROPIC_COMPACTION_MIN_TRIGGER = 50_000

MessageTokens = Callable[[ModelMessage], int]


# --------------------------------------------------------------------------- Anthropic


@dataclass(frozen=True)
class ClearToolUses:
    """`clear_tool_uses_20250919` settings; the defaults are the documented ones.

    `trigger_tool_uses` replaces the input-token trigger when set (the `tool_uses` trigger
    type). `clear_at_least` None: no minimum.
    """

    trigger_input_tokens: int = 100_000
    trigger_tool_uses: int | None = None
    keep_tool_uses: int = 3
    clear_at_least: int | None = None
    exclude_tools: frozenset[str] = frozenset()
    clear_tool_inputs: bool = False

    def describe(self) -> str:
        trigger = (
            f"{self.trigger_tool_uses} tool uses"
            if self.trigger_tool_uses is not None
            else f"{self.trigger_input_tokens:,} input tokens"
        )
        parts = [f"trigger {trigger}", f"keep {self.keep_tool_uses} tool uses"]
        if self.clear_at_least is not None:
            parts.append(f"clear_at_least {self.clear_at_least:,}")
        if self.exclude_tools:
            parts.append(f"exclude_tools {sorted(self.exclude_tools)}")
        if self.clear_tool_inputs:
            parts.append("clear_tool_inputs")
        return ", ".join(parts)


@dataclass(frozen=True)
class Edited:
    """A view after an edit: its messages, the positions changed and the tokens freed."""

    messages: tuple[ModelMessage, ...]
    cleared: tuple[int, ...] = ()
    cleared_tokens: int = 0


def tool_uses(messages: Sequence[ModelMessage]) -> list[tuple[int, int | None]]:
    """(call position, result position or None) of every tool use, in call order."""
    results = {
        m.tool_call_id: i
        for i, m in enumerate(messages)
        if m.kind == KIND_TOOL_RESULT and m.tool_call_id is not None
    }
    return [
        (i, results.get(m.tool_call_id))
        for i, m in enumerate(messages)
        if m.kind == KIND_TOOL_CALL and m.tool_call_id is not None
    ]


def clear_tool_uses(
    messages: Sequence[ModelMessage],
    *,
    prompt_tokens: int,
    count: MessageTokens,
    config: ClearToolUses = ClearToolUses(),
) -> Edited:
    """The request's messages as the model sees them under `clear_tool_uses_20250919`.

    `prompt_tokens` is the request's input before the edit (tools and system included),
    `count` a message's tokens. Over the trigger, every tool use but the newest
    `keep_tool_uses` (and those of `exclude_tools`) has its result replaced by
    CLEARED_PLACEHOLDER (and its arguments by {} with `clear_tool_inputs`); if that frees
    fewer than `clear_at_least` tokens, nothing changes.
    """
    uses = tool_uses(messages)
    if config.trigger_tool_uses is not None:
        if len(uses) <= config.trigger_tool_uses:
            return Edited(tuple(messages))
    elif prompt_tokens <= config.trigger_input_tokens:
        return Edited(tuple(messages))
    kept = max(config.keep_tool_uses, 0)
    candidates = uses[: max(len(uses) - kept, 0)]
    out = list(messages)
    changed: list[int] = []
    freed = 0
    for call_at, result_at in candidates:
        call = messages[call_at]
        if call.tool_name in config.exclude_tools:
            continue
        if result_at is not None and messages[result_at].content != CLEARED_PLACEHOLDER:
            result = messages[result_at]
            out[result_at] = replace(result, content=CLEARED_PLACEHOLDER)
            freed += count(result) - count(out[result_at])
            changed.append(result_at)
        if config.clear_tool_inputs and call.arguments:
            out[call_at] = replace(call, arguments={})
            freed += count(call) - count(out[call_at])
            changed.append(call_at)
    if not changed or (config.clear_at_least is not None and freed < config.clear_at_least):
        return Edited(tuple(messages))
    return Edited(tuple(out), tuple(sorted(changed)), freed)


@dataclass(frozen=True)
class Compaction:
    """`compact_20260112` settings: the documented default trigger, and the summary's length.

    `summary_tokens` is this simulation's assumption (the API's summary length depends on
    the conversation and the model), recorded with the figures.
    """

    trigger_input_tokens: int = 150_000
    summary_tokens: int = 2_000

    def __post_init__(self) -> None:
        if self.trigger_input_tokens < ANTHROPIC_COMPACTION_MIN_TRIGGER:
            raise ValueError(
                f"compaction trigger must be at least {ANTHROPIC_COMPACTION_MIN_TRIGGER:,} "
                f"input tokens (the API's minimum), got {self.trigger_input_tokens:,}."
            )

    def describe(self) -> str:
        return (
            f"trigger {self.trigger_input_tokens:,} input tokens, "
            f"summary {self.summary_tokens:,} tokens (assumed)"
        )


@dataclass(frozen=True)
class CompactedTurn:
    """One request of a compacting agent.

    `messages` is what the model answers from. When this request compacted, `summarized`
    holds the messages the summary call read (the request as it stood) and the summary's
    output tokens are billed on top; `messages` is then system and summary alone.
    """

    messages: tuple[ModelMessage, ...]
    summarized: tuple[ModelMessage, ...] | None = None
    summary_output_tokens: int = 0


def summary_message(text: str) -> ModelMessage:
    """The compaction block, as the assistant turn it opens (text in `<summary>` tags)."""
    return ModelMessage(role=ROLE_ASSISTANT, kind=KIND_TEXT, content=f"<summary>{text}</summary>")


class Compactor:
    """Threshold compaction, one request at a time (the state is the last summary).

    Each turn given to `step` is a naive view (system, then every raw message) extending the
    previous one. The request sent is system, the last summary (if any) and the messages
    after the turn it was made at; `edit`, if given, is applied to it first (another context
    edit of the same request). When its tokens reach the trigger, the request compacts: the
    summary call reads it, and the model answers from system + summary. `summary_text(n)`
    gives the text of the n-th summary.
    """

    def __init__(
        self,
        *,
        prompt_tokens: Callable[[Sequence[ModelMessage]], int],
        summary_text: Callable[[int], str],
        config: Compaction = Compaction(),
        edit: Callable[[Sequence[ModelMessage]], Sequence[ModelMessage]] | None = None,
    ) -> None:
        self.prompt_tokens = prompt_tokens
        self.summary_text = summary_text
        self.config = config
        self.edit = edit
        self.summary: ModelMessage | None = None
        self.since = 1  # the first raw message after system that requests still carry
        self.made = 0

    def step(self, turn: Sequence[ModelMessage]) -> CompactedTurn:
        system = turn[0]
        head = (system,) if self.summary is None else (system, self.summary)
        request: Sequence[ModelMessage] = (*head, *turn[self.since :])
        if self.edit is not None:
            request = self.edit(request)
        if self.prompt_tokens(request) < self.config.trigger_input_tokens:
            return CompactedTurn(messages=tuple(request))
        self.made += 1
        self.summary = summary_message(self.summary_text(self.made))
        self.since = len(turn)
        return CompactedTurn(
            messages=(system, self.summary),
            summarized=tuple(request),
            summary_output_tokens=self.config.summary_tokens,
        )


def compaction_turns(
    turns: Sequence[Sequence[ModelMessage]],
    *,
    prompt_tokens: Callable[[Sequence[ModelMessage]], int],
    summary_text: Callable[[int], str],
    config: Compaction = Compaction(),
    edit: Callable[[Sequence[ModelMessage]], Sequence[ModelMessage]] | None = None,
) -> list[CompactedTurn]:
    """Threshold compaction over an agent's turns (see Compactor), one result per turn."""
    compactor = Compactor(
        prompt_tokens=prompt_tokens, summary_text=summary_text, config=config, edit=edit
    )
    return [compactor.step(turn) for turn in turns]


# --------------------------------------------------------------------------- OpenAI Agents SDK


@dataclass(frozen=True)
class ToolOutputTrimmer:
    """`agents.extensions.ToolOutputTrimmer` settings; the defaults are the SDK's."""

    recent_turns: int = 2
    max_output_chars: int = 500
    preview_chars: int = 200
    trimmable_tools: frozenset[str] | None = field(default=None)

    def describe(self) -> str:
        tools = "all tools" if self.trimmable_tools is None else sorted(self.trimmable_tools)
        return (
            f"recent_turns {self.recent_turns}, max_output_chars {self.max_output_chars}, "
            f"preview_chars {self.preview_chars}, {tools}"
        )


def _output_text(content: Any) -> str:
    # The SDK measures a string as is and anything else as sorted-key JSON.
    if isinstance(content, str):
        return content
    return json.dumps(content, ensure_ascii=False, sort_keys=True, default=str)


def trimmed_output(tool_name: str | None, content: Any, config: ToolOutputTrimmer) -> str | None:
    """The SDK's replacement for one old tool output, or None when it stays as it is."""
    text = _output_text(content)
    if len(text) <= config.max_output_chars:
        return None
    preview = text[: config.preview_chars]
    summary = (
        f"[Trimmed: {tool_name or 'unknown_tool'} output \u2014 {len(text)} chars \u2192 "
        f"{config.preview_chars} char preview]\n{preview}..."
    )
    return None if len(summary) >= len(text) else summary


def trim_tool_outputs(
    messages: Sequence[ModelMessage], config: ToolOutputTrimmer = ToolOutputTrimmer()
) -> Edited:
    """The view as the Agents SDK sends it with `ToolOutputTrimmer` as its input filter.

    The boundary is the `recent_turns`-th user message from the end (none: nothing is old);
    tool results before it are trimmed. A user message is a user-role input: tool outputs
    are items of their own in the SDK, not user messages.
    """
    boundary = 0
    seen = 0
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].role == ROLE_USER and messages[i].kind == KIND_INPUT:
            seen += 1
            if seen >= config.recent_turns:
                boundary = i
                break
    if boundary == 0:
        return Edited(tuple(messages))
    names: Mapping[str | None, str | None] = {
        m.tool_call_id: m.tool_name for m in messages if m.kind == KIND_TOOL_CALL
    }
    out = list(messages)
    changed = []
    for i in range(boundary):
        message = messages[i]
        if message.kind != KIND_TOOL_RESULT:
            continue
        name = message.tool_name or names.get(message.tool_call_id)
        if config.trimmable_tools is not None and name not in config.trimmable_tools:
            continue
        trimmed = trimmed_output(name, message.content, config)
        if trimmed is not None:
            out[i] = replace(message, content=trimmed)
            changed.append(i)
    if not changed:
        return Edited(tuple(messages))
    return Edited(tuple(out), tuple(changed))
