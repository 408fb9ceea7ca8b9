"""A gateway client's part of a session's state (contract §14): its system text and its tools.

Both are KV, so a view stays a pure function of the state at R and the log: `gateway/system`
(the text put where the version's prompt says `{{client_system}}`) and `gateway/tools` (the
tool names in the client's order), each tool's definition under `gateway/tool/<name>`; one
key per tool keeps every value far below the KV value limit even for clients whose tool
definitions run to tens of kilobytes. A custom (free-form) tool (contract §21) is stored with
its `kind` and the client's `format` beside its schema (contextproto/protocol/custom_tools.py).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, NotRequired, TypedDict

from contextproto.protocol.custom_tools import KIND_CUSTOM


class ClientToolWire(TypedDict):
    """A client tool as the session stores it (KV `gateway/tools`) and the view sends it.

    `kind` and `format` only for a custom tool: `"custom"` and the grammar or text format
    its input follows (None: free text)."""

    name: str
    description: str
    inputSchema: dict[str, Any]
    kind: NotRequired[str]
    format: NotRequired[dict[str, Any] | None]


KEY_SYSTEM = "gateway/system"
KEY_TOOLS = "gateway/tools"
TOOL_PREFIX = "gateway/tool/"
# Read with every view: the system text and the tool names (the definitions follow when
# there are names).
VIEW_KEYS = (KEY_SYSTEM, KEY_TOOLS)


# Reads the values of the keys it is given that exist in the state (absent keys left out): a
# view source's `kv`, or the live KV table's read.
KvRead = Callable[[Sequence[str]], Mapping[str, Any]]


def tool_key(name: str) -> str:
    return TOOL_PREFIX + name


def read_client_kv(read: KvRead, keys: Sequence[str] = VIEW_KEYS) -> dict[str, Any]:
    """`keys` read with `read`, then the definitions of the client tools they name: the two
    steps every reader of a client's tools takes (a tool's definition has a key of its own).

    `keys` must hold `KEY_TOOLS` for the definitions to follow; two reads at most.
    """
    kv = dict(read(keys))
    names = tool_names(kv)
    if names:
        kv.update(read([tool_key(n) for n in names]))
    return kv


def tool_names(kv: Mapping[str, Any]) -> list[str]:
    names = kv.get(KEY_TOOLS)
    return [n for n in names if isinstance(n, str)] if isinstance(names, list) else []


def client_system(kv: Mapping[str, Any]) -> str:
    text = kv.get(KEY_SYSTEM)
    return text if isinstance(text, str) else ""


def client_tools(kv: Mapping[str, Any]) -> list[ClientToolWire]:
    """The stored client tools in the client's order (`kv` holds the per-tool keys)."""
    tools: list[ClientToolWire] = []
    for name in tool_names(kv):
        definition = kv.get(tool_key(name))
        if not isinstance(definition, Mapping):
            continue
        tool: ClientToolWire = {
            "name": name,
            "description": str(definition.get("description") or ""),
            "inputSchema": dict(definition.get("inputSchema") or {"type": "object"}),
        }
        if definition.get("kind") == KIND_CUSTOM:
            custom_format = definition.get("format")
            tool["kind"] = KIND_CUSTOM
            tool["format"] = dict(custom_format) if isinstance(custom_format, Mapping) else None
        tools.append(tool)
    return tools


def definition_of(tool: ClientToolWire) -> dict[str, Any]:
    """What KV `gateway/tool/<name>` holds for `tool`."""
    definition: dict[str, Any] = {
        "description": tool["description"],
        "inputSchema": tool["inputSchema"],
    }
    if tool.get("kind") == KIND_CUSTOM:
        definition["kind"] = KIND_CUSTOM
        definition["format"] = tool.get("format")
    return definition


def client_state_writes(
    kv: Mapping[str, Any], system: str, tools: Sequence[ClientToolWire]
) -> tuple[dict[str, Any], list[str]]:
    """What to write so the stored client state equals the request's: (upserts, removals).

    Both empty when nothing changed, so a request that resends the same system text and
    tools commits no revision. `kv` holds the stored state (VIEW_KEYS and the tool keys).
    """
    upserts: dict[str, Any] = {}
    if client_system(kv) != system:
        upserts[KEY_SYSTEM] = system
    names = [t["name"] for t in tools]
    stored = tool_names(kv)
    if stored != names:
        upserts[KEY_TOOLS] = names
    for tool in tools:
        definition = definition_of(tool)
        if kv.get(tool_key(tool["name"])) != definition:
            upserts[tool_key(tool["name"])] = definition
    removals = [tool_key(name) for name in stored if name not in names]
    return upserts, removals


def merged_tools(
    protocol_and_host: Sequence[Mapping[str, Any]], client: Sequence[ClientToolWire]
) -> list[dict[str, Any]]:
    """The view's tools: protocol tools, then host tools, then client tools (contract §14).

    A client tool shadows a host tool of the same name (it takes the client's definition,
    at the client's place); protocol tools cannot be shadowed (such names are refused).
    """
    names = {t["name"] for t in client}
    kept = [dict(t) for t in protocol_and_host if t["name"] not in names]
    return kept + [dict(t) for t in client]
