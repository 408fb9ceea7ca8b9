"""The anthropic-messages adapter (contract §4.5, §8): a Projection as one Messages API body.

Prompt caching with `prompt_cache` mode `auto` (sources in adapters.py's docstring): at most
four `cache_control` breakpoints, on the last tool, the system prompt (then sent as one text
block), the last history block before any trailing derived message, and an earlier history
block as a fallback (`_anthropic_breakpoints`). Anthropic renders tools, system, messages in
that order and writes cache entries only at breakpoints, so a marker on the last block (what
its automatic top-level `cache_control` does) would cache the unified@2/3 state message, which
changes every turn: an entry no later request can read. Derived header and state messages,
edge text and a prefill never carry a marker; folds and other history do. Thinking blocks go
back unchanged, first in their assistant turn, and never carry a breakpoint.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from contextproto.protocol.adapter_base import (
    PROVIDER_ANTHROPIC_MESSAGES,
    ROLE_SYSTEM,
    AdaptedRequest,
    AdaptOptions,
    _text_of,
)
from contextproto.protocol.content_parts import is_image_part, is_text_part, is_thinking_part
from contextproto.protocol.custom_tools import described, is_custom
from contextproto.protocol.messages import (
    ANSWER_KINDS,
    KIND_TOOL_CALL,
    KIND_TOOL_RESULT,
    ROLE_ASSISTANT,
    ROLE_TOOL,
    ROLE_USER,
    ModelMessage,
)
from contextproto.protocol.projection import Projection
from contextproto.protocol.prompt_cache import TTL_5M

NOTE_ANTHROPIC_PREFILL = (
    "trailing assistant message is sent as a prefill on anthropic-messages: the model "
    "continues it instead of answering after it"
)
NOTE_ANTHROPIC_DERIVED_AS_USER = (
    "derived {kinds} at the edge of the conversation sent in the user role on "
    "anthropic-messages (the first message must be a user turn, and a trailing assistant "
    "turn would be continued, not answered); marked as derived state with no user authority"
)
DERIVED_EDGE_MARKER = "[context protocol: derived state, not a message from the user]\n"
NOTE_ANTHROPIC_FIRST_ASSISTANT = (
    "first message after the system prompt is an assistant message on anthropic-messages "
    "(the conversation starts with an assistant turn)"
)


# Anthropic's lookback: a breakpoint finds an entry written earlier at most this many
# content blocks before it (its prompt-caching guide says about 20).
CACHE_LOOKBACK_BLOCKS = 20
# The fallback breakpoint sits on a multiple of FALLBACK_STRIDE blocks that is at least
# FALLBACK_DISTANCE blocks behind the last breakpoint (see _anthropic_breakpoints).
FALLBACK_STRIDE = 4
FALLBACK_DISTANCE = 12
# Messages that are not history: they never carry a cache breakpoint (contract §8). Anything
# else (raw messages, folds, masked results of later versions) is history.
NOT_HISTORY = frozenset({"system", "context_header", "context_state"})


def anthropic_tool_choice() -> dict[str, Any]:
    """The `tool_choice` of every anthropic-messages request with tools (contract §4.5): the
    model chooses whether to call a tool, and calls at most one. A new dict each time."""
    return {"type": "auto", "disable_parallel_tool_use": True}


def _anthropic_blocks(content: Any, *, answer: bool = False) -> list[dict[str, Any]]:
    """Content blocks of `content`; for a model's answer its thinking blocks first.

    Thinking and redacted_thinking parts are sent back as stored (same keys and values: the
    signature vouches for them), in stored order, before text and images; they are left out
    of anything that is not an answer (only answers may store them).
    """
    if not isinstance(content, list):
        text = _text_of(content)
        return [{"type": "text", "text": text}] if text else []
    blocks = [dict(p) for p in content if answer and is_thinking_part(p)]
    for part in content:
        if not isinstance(part, dict):
            continue
        if is_image_part(part):
            if part.get("url"):
                source = {"type": "url", "url": part["url"]}
            else:
                source = {
                    "type": "base64",
                    "media_type": part.get("mediaType"),
                    "data": part.get("data"),
                }
            blocks.append({"type": "image", "source": source})
        elif is_text_part(part) and part.get("text"):
            # Anthropic refuses empty text blocks.
            blocks.append({"type": "text", "text": part["text"]})
    return blocks


def _anthropic_message(
    message: ModelMessage, projection: Projection
) -> tuple[str, list[dict[str, Any]]]:
    if message.kind == KIND_TOOL_CALL:
        # The answer as given: its thinking, the text beside the call, then the call.
        return ROLE_ASSISTANT, [
            *_anthropic_blocks(message.content, answer=True),
            {
                "type": "tool_use",
                "id": message.tool_call_id,
                "name": message.tool_name,
                # Anthropic takes only an object; text that is none (a model's malformed
                # JSON) travels as {} and the snapshot's notes say so.
                "input": message.arguments if isinstance(message.arguments, dict) else {},
            },
        ]
    if message.kind == KIND_TOOL_RESULT or message.role == ROLE_TOOL:
        content: Any = message.content
        content = _anthropic_blocks(content) if isinstance(content, list) else _text_of(content)
        return ROLE_USER, [
            {
                "type": "tool_result",
                "tool_use_id": message.tool_call_id,
                "content": content,
                "is_error": message.tool_call_id in projection.error_tool_call_ids,
            }
        ]
    role = ROLE_ASSISTANT if message.role == ROLE_ASSISTANT else ROLE_USER
    answer = role == ROLE_ASSISTANT and message.kind in ANSWER_KINDS
    return role, _anthropic_blocks(message.content, answer=answer)


def _join_turn(turn: list[dict[str, Any]], blocks: list[dict[str, Any]]) -> bool:
    """Append one message's blocks to the turn before it of the same role.

    Its thinking blocks go after the turn's leading thinking blocks, not after its other
    blocks: Anthropic wants an assistant turn to start with its thinking. Returns whether a
    thinking block moved ahead of an earlier message's blocks (a fold, a second answer).
    """
    thinking = [b for b in blocks if is_thinking_part(b)]
    lead = 0
    while lead < len(turn) and is_thinking_part(turn[lead]):
        lead += 1
    moved = bool(thinking) and lead < len(turn)
    turn[lead:lead] = thinking
    turn.extend(b for b in blocks if not is_thinking_part(b))
    return moved


def _edge_derived_positions(projection: Projection, *, keep_trailing: bool = False) -> set[int]:
    """Positions of derived assistant messages before the first / after the last raw one.

    With `keep_trailing` (the model accepts a prefill) the ones after the last raw message
    are not edges: they stay assistant turns, so a trailing assistant state keeps its role.
    """
    raw = [
        i
        for i, m in enumerate(projection.messages)
        if m.role != ROLE_SYSTEM and m.kind not in _DERIVED_KINDS
    ]
    first_raw = raw[0] if raw else len(projection.messages)
    last_raw = raw[-1] if raw else -1
    return {
        i
        for i, m in enumerate(projection.messages)
        if m.kind in _DERIVED_KINDS
        and m.role == ROLE_ASSISTANT
        and (i < first_raw or (i > last_raw and not keep_trailing))
    }


_DERIVED_KINDS = frozenset({"context_header", "context_fold", "context_state"})


def _is_history(projection: Projection, position: int) -> bool:
    """Whether message `position` stands for history (raw, fold, masked) rather than for
    the system prompt, the header or the state; read off both its source and its kind."""
    message = projection.messages[position]
    derived = (
        projection.sources[position].derived_type if position < len(projection.sources) else None
    )
    return (
        message.role != ROLE_SYSTEM
        and message.kind not in NOT_HISTORY
        and derived not in NOT_HISTORY
    )


def _cache_control(ttl: str) -> dict[str, str]:
    # 5m is the provider's default: say "ttl" only when it differs (contract §8).
    return {"type": "ephemeral"} if ttl == TTL_5M else {"type": "ephemeral", "ttl": ttl}


def _anthropic_breakpoints(
    merged: list[dict[str, Any]], history_blocks: set[int]
) -> list[dict[str, Any]]:
    """The message blocks that get a breakpoint: the last history block, and a fallback.

    Candidates are history blocks (`history_blocks` holds their ids), never a block of a
    trailing assistant message (a prefill: the model continues it). The last candidate is
    the sliding breakpoint: the next turn appends after it and reads the entry it wrote.

    Anthropic finds an earlier entry only within about CACHE_LOOKBACK_BLOCKS blocks before a
    breakpoint, so a turn that appends more than that (parallel tool calls, long host work)
    would miss the previous turn's entry and write the whole history again. The fallback
    covers that: it sits on the last candidate at or before the multiple of FALLBACK_STRIDE
    that lies at least FALLBACK_DISTANCE blocks behind the last breakpoint, i.e. 12 to 15
    blocks back. A turn that appended d blocks then has a breakpoint within the lookback
    after the previous turn's last breakpoint for every d up to about 32 (the last
    breakpoint covers d up to 20, the fallback 15 to 32), with no gap even if the lookback
    is only 15 blocks. Aligned to a stride, the fallback stays on the same block while a
    conversation grows by a few blocks a turn, so consecutive turns hit it exactly instead of
    relying on the lookback; block positions count every message block, and an append-only
    turn leaves the positions before it unchanged (the byte-stable prefix), so the same
    block is chosen again.
    """
    trailing_prefill = bool(merged) and merged[-1]["role"] == ROLE_ASSISTANT
    candidates: list[tuple[int, dict[str, Any]]] = []
    position = 0
    for n, message in enumerate(merged):
        for block in message["content"]:
            prefill = trailing_prefill and n == len(merged) - 1
            if id(block) in history_blocks and not prefill:
                candidates.append((position, block))
            position += 1
    if not candidates:
        return []
    last_position, last = candidates[-1]
    target = (last_position - FALLBACK_DISTANCE) // FALLBACK_STRIDE * FALLBACK_STRIDE
    earlier = [block for p, block in candidates if 0 <= p <= target]
    return [earlier[-1], last] if earlier else [last]


def adapt_anthropic(
    projection: Projection, tools: Sequence[Mapping[str, Any]], options: AdaptOptions
) -> AdaptedRequest:
    """The view as an Anthropic Messages request body."""
    assistant_prefill, prompt_cache = options.assistant_prefill, options.prompt_cache
    notes: list[str] = []
    system_texts: list[str] = []
    merged: list[dict[str, Any]] = []
    # id() of every block that stands for history (may carry a breakpoint); the blocks live
    # in `merged` until the body is returned, so their ids stay unique.
    history_blocks: set[int] = set()
    edges = _edge_derived_positions(projection, keep_trailing=assistant_prefill)
    moved: list[str] = []
    for position, message in enumerate(projection.messages):
        if message.role == ROLE_SYSTEM:
            system_texts.append(_text_of(message.content))
            continue
        role, blocks = _anthropic_message(message, projection)
        if message.kind == KIND_TOOL_CALL and isinstance(message.arguments, str):
            notes.append(
                f"anthropic-messages: the arguments of {message.tool_call_id} are not a JSON "
                "object (kept as the model wrote them); sent as input {}"
            )
        if position in edges:
            # A leading assistant turn and a trailing prefill are refused by the Messages
            # API; the derived state goes in the user role, marked as carrying no authority.
            role = ROLE_USER
            blocks = [{"type": "text", "text": DERIVED_EDGE_MARKER + _text_of(message.content)}]
            moved.append(message.kind)
        elif _is_history(projection, position):
            # Anthropic refuses cache_control on a thinking block: never a candidate.
            history_blocks.update(id(block) for block in blocks if not is_thinking_part(block))
        if not blocks:
            notes.append(
                f"anthropic-messages: empty {message.role}/{message.kind} message at position "
                f"{position} was not sent (empty content is refused)"
            )
            continue
        if merged and merged[-1]["role"] == role:
            if _join_turn(merged[-1]["content"], blocks):
                notes.append(
                    f"anthropic-messages: thinking block(s) of the {message.role}/{message.kind} "
                    f"message at position {position} were moved to the start of its assistant "
                    "turn, before the blocks of the message(s) merged before it (thinking comes "
                    "first in an assistant turn)"
                )
        else:
            merged.append({"role": role, "content": list(blocks)})

    for turn in merged:
        blocks = turn["content"]
        results = [b for b in blocks if b["type"] == "tool_result"]
        kinds = [b["type"] == "tool_result" for b in blocks]
        # Out of order when some other block precedes the last tool_result block.
        if results and kinds[: len(results)] != [True] * len(results):
            # Anthropic wants tool_result blocks first in the user turn that answers a
            # tool_use; a merged user message may carry other user content before them.
            turn["content"] = results + [b for b in blocks if b["type"] != "tool_result"]
            ids = ", ".join(str(b["tool_use_id"]) for b in results)
            notes.append(
                f"anthropic-messages: tool_result block(s) {ids} were moved before other "
                "content of their user message (tool results must come first)"
            )

    if moved:
        notes.append(NOTE_ANTHROPIC_DERIVED_AS_USER.format(kinds=", ".join(moved)))
    if merged and merged[0]["role"] == ROLE_ASSISTANT:
        notes.append(NOTE_ANTHROPIC_FIRST_ASSISTANT)
    if merged and merged[-1]["role"] == ROLE_ASSISTANT:
        notes.append(NOTE_ANTHROPIC_PREFILL)

    cache = prompt_cache.enabled
    body: dict[str, Any] = {}
    if system_texts:
        system = "\n\n".join(system_texts)
        # Breakpoints go on blocks, so a cached system prompt travels as one text block
        # (an empty one would be refused, and has nothing to cache).
        body["system"] = (
            [{"type": "text", "text": system, "cache_control": _cache_control(prompt_cache.ttl)}]
            if cache and system
            else system
        )
    body["messages"] = merged
    if tools:
        body["tools"] = [
            {
                "name": t["name"],
                # A custom tool is its one-string-argument form; the description says so.
                "description": described(t) if is_custom(t) else t.get("description", ""),
                "input_schema": t.get("inputSchema") or {"type": "object"},
            }
            for t in tools
        ]
        if cache:
            body["tools"][-1]["cache_control"] = _cache_control(prompt_cache.ttl)
        # Only the first call of an answer is executed (contract §5.6): ask for one.
        body["tool_choice"] = anthropic_tool_choice()
    if cache:
        for block in _anthropic_breakpoints(merged, history_blocks):
            block["cache_control"] = _cache_control(prompt_cache.ttl)
    return AdaptedRequest(provider=PROVIDER_ANTHROPIC_MESSAGES, body=body, notes=tuple(notes))
