"""Compare two turns' provider requests up to the first appended message (contract §8).

A request is cut into units in the order the provider renders it, each unit one canonical
JSON string with the `cache_control` markers removed (the markers move by design):
* neutral: each tool, then each message;
* openai-chat: `prompt_cache_key`, `parallel_tool_calls`, each tool, then each message (the
  system prompt is the first message);
* anthropic-messages: `tool_choice`, each tool, the system prompt (a string, or each text
  block), then each content block with its message's role. Roles alternate, so a role
  change is a new message; blocks are what Anthropic caches at and looks back over, and a
  block appended to the last message of the previous turn leaves the blocks before it
  unchanged.
* openai-responses: `prompt_cache_key`, `parallel_tool_calls`, `store`, `include`, each tool,
  the `instructions` (the system prompt), then each input item; a header or state message is
  one item, an answer one item each for its reasoning, text and call.

Every message of a projection that is not history (the header, the state) is exactly one
unit in every adapter, which is how the helpers find them. What a later turn that only
appends raw messages must repeat is the earlier turn's units without the derived messages
after its history (they follow the appended messages now); a state message placed before
the history (unified@3 B) changes every turn by design and is compared as a placeholder.
Later protocol versions add their own volatile kinds through `volatile`.
"""

from __future__ import annotations

import json
from collections.abc import Collection
from typing import Any

from contextproto.protocol.projection import Projection

ANTHROPIC = "anthropic-messages"
RESPONSES = "openai-responses"
# Whose system prompt is no message (so a message unit's index skips it).
SYSTEM_APART = (ANTHROPIC, RESPONSES)
NOT_HISTORY = frozenset({"system", "context_header", "context_state"})
VOLATILE = frozenset({"context_state"})


def strip_markers(value: Any) -> Any:
    """`value` without any `cache_control` key, at any depth."""
    if isinstance(value, dict):
        return {k: strip_markers(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [strip_markers(v) for v in value]
    return value


def _unit(value: Any) -> str:
    # No sort_keys: a key order that moved between turns is a difference.
    return json.dumps(strip_markers(value), ensure_ascii=False)


def request_units(provider: str, body: dict[str, Any]) -> tuple[list[str], list[str]]:
    """(prelude units, message units) of `body` in the provider's render order."""
    prelude: list[str] = []
    # Request-wide settings first: a change to any of them is a change before every message.
    for key in ("prompt_cache_key", "parallel_tool_calls", "tool_choice", "store", "include"):
        if key in body:
            prelude.append(_unit({key: body[key]}))
    prelude += [_unit({"tool": tool}) for tool in body.get("tools") or ()]
    if provider == RESPONSES:
        if "instructions" in body:
            prelude.append(_unit({"instructions": body["instructions"]}))
        return prelude, [_unit(item) for item in body["input"]]
    if provider != ANTHROPIC:
        return prelude, [_unit(message) for message in body["messages"]]
    system = body.get("system")
    if isinstance(system, list):
        prelude += [_unit({"system": block}) for block in system]
    elif system is not None:
        prelude.append(_unit({"system": system}))
    units = []
    for message in body["messages"]:
        content = message["content"]
        blocks = content if isinstance(content, list) else [{"type": "text", "text": content}]
        units += [_unit({"role": message["role"], "block": block}) for block in blocks]
    return prelude, units


def _is_history(projection: Projection, position: int) -> bool:
    message = projection.messages[position]
    return (
        message.role != "system"
        and message.kind not in NOT_HISTORY
        and projection.sources[position].derived_type not in NOT_HISTORY
    )


def _unit_index(provider: str, projection: Projection, position: int) -> int:
    """The message unit of projection message `position`, for messages before the history
    or after it (each is one unit; only the system prompt may precede them)."""
    systems = sum(1 for m in projection.messages[:position] if m.role == "system")
    return position - systems if provider in SYSTEM_APART else position


def comparable_units(
    provider: str,
    projection: Projection,
    body: dict[str, Any],
    *,
    volatile: Collection[str] = VOLATILE,
    drop_trailing: bool = False,
) -> list[str]:
    """The units of `body`, volatile derived messages as placeholders; with `drop_trailing`
    without the derived messages after the history (the header always stays)."""
    prelude, units = request_units(provider, body)
    history = [p for p in range(len(projection.messages)) if _is_history(projection, p)]
    last_history = history[-1] if history else -1
    first_history = history[0] if history else len(projection.messages)
    derived = [
        p
        for p, m in enumerate(projection.messages)
        if m.role != "system" and not _is_history(projection, p)
    ]
    trailing = [
        p for p in derived if p > last_history and projection.messages[p].kind != "context_header"
    ]
    for p in derived:
        kind = projection.messages[p].kind
        if p < first_history and kind in volatile and p not in trailing:
            units[_unit_index(provider, projection, p)] = f"<volatile {kind}>"
    if drop_trailing and trailing:
        units = units[: len(units) - len(trailing)]
    return prelude + units


def assert_prefix_kept(
    provider: str,
    before: tuple[Projection, dict[str, Any]],
    after: tuple[Projection, dict[str, Any]],
    *,
    volatile: Collection[str] = VOLATILE,
) -> None:
    """Assert that the later turn's request repeats the earlier one up to its first appended
    message: every unit before it equal, byte for byte, markers aside."""
    kept = comparable_units(provider, *before, volatile=volatile, drop_trailing=True)
    later = comparable_units(provider, *after, volatile=volatile)
    for n, (was, now) in enumerate(zip(kept, later, strict=False)):
        assert was == now, (
            f"{provider}: unit {n} of {len(kept)} changed by an append-only turn:\n"
            f"before: {was[:400]}\nafter:  {now[:400]}"
        )
    assert len(later) > len(kept), f"{provider}: the later request is not longer"
