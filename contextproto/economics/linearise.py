"""A provider request as the prompt cache sees it: blocks in prefix order, and where two differ.

`linearise` puts a request body (as the adapters build it) in its provider's prefix order with
cumulative token counts and chained prefix hashes; `first_divergence` finds the first block
where two consecutive requests differ. The cache simulator (`cache_sim.py`) and the cause
tracing of the cache report (`causes.py`) both read requests this way.

Canonical prefix order (what is compared, block by block):
* anthropic-messages: each tool, then each system text block (a string system prompt is one
  text block), then each message's content blocks in order (a string content is one text
  block). A block is its JSON as sent (key order kept), with every `cache_control` removed,
  plus its position (section, message, block) and, for message blocks, the role.
* openai-chat: each tool, then each message as one block. OpenAI renders tool definitions
  into the prompt ahead of the conversation, so a changed tool list re-bills everything.
  Matching is at block (message) boundaries: a message that differs is not credited with
  its first identical tokens, so cached figures are slightly low (by less than a message).
Tokens of a block are counted once per distinct content, on that JSON text.

A malformed body or an unknown provider raises `CacheSimError` with what to fix.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from hashlib import blake2b as _blake2b
from typing import Any, Literal, NamedTuple, TypeGuard

from contextproto.protocol.adapters import PROVIDER_ANTHROPIC_MESSAGES, PROVIDER_OPENAI_CHAT
from contextproto.protocol.content_parts import is_thinking_part

SIMULATED_PROVIDERS = (PROVIDER_OPENAI_CHAT, PROVIDER_ANTHROPIC_MESSAGES)

SECTION_TOOLS = "tools"
SECTION_SYSTEM = "system"
SECTION_MESSAGES = "messages"

TokenCounter = Callable[[str], int]


class CacheSimError(ValueError):
    """A request the simulator cannot replay, with what to fix."""


# --------------------------------------------------------------------------- linearising


# A dataclass, not a NamedTuple: a tuple's own `index` method would clash with the field.
@dataclass(frozen=True, slots=True)
class BlockRef:
    """Where a block sits in the request body.

    `index` is the tool's, the system block's or the message's position in its list (the
    body's `messages`, after the adapter's merges); `block` the content block's position in
    that message (None for tools, system blocks and OpenAI messages).
    """

    section: str
    index: int
    block: int | None = None
    role: str | None = None

    def describe(self) -> str:
        if self.section == SECTION_TOOLS:
            return f"tool #{self.index}"
        if self.section == SECTION_SYSTEM:
            return f"system block #{self.index}"
        where = f"message #{self.index}"
        if self.block is not None:
            where += f" block #{self.block}"
        return f"{where} ({self.role})" if self.role else where


class Block(NamedTuple):
    """One unit of the prefix: its place, token count, content digest and marker.

    Two blocks are the same when both `ref` and `digest` are equal (markers excluded).
    """

    ref: BlockRef
    tokens: int
    digest: bytes
    marker: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class Linearised:
    """A request in the provider's prefix order with cumulative tokens and prefix hashes.

    `cumulative[i]` is the token count of blocks 0..i, `prefixes[i]` a hash of them;
    `automatic` is a top-level `cache_control` (Anthropic's automatic caching), if any.
    """

    provider: str
    blocks: tuple[Block, ...]
    cumulative: tuple[int, ...]
    prefixes: tuple[bytes, ...]
    automatic: Mapping[str, Any] | None = None

    @property
    def total_tokens(self) -> int:
        return self.cumulative[-1] if self.cumulative else 0

    def tokens_through(self, position: int) -> int:
        """Tokens of the prefix that ends with block `position` (-1: the empty prefix)."""
        return self.cumulative[position] if position >= 0 else 0


# One encoder for every block: json.dumps with options builds a new one per call.
_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))


def _is_mapping(value: object) -> TypeGuard[Mapping[str, Any]]:
    return type(value) is dict or isinstance(value, Mapping)


def _strip_markers(value: Any, found: list[Any]) -> Any:
    """`value` without any `cache_control` key, collecting the removed markers in `found`."""
    if _is_mapping(value):
        out = {}
        for key, item in value.items():
            if key == "cache_control":
                found.append(item)
            else:
                out[key] = _strip_markers(item, found)
        return out
    if isinstance(value, list):
        return [_strip_markers(item, found) for item in value]
    return value


def _encode(value: Any) -> tuple[str, Any]:
    """The compared text of a block (markers removed) and its marker, if it carries one."""
    text = _ENCODER.encode(value)
    # Fast path: the key can only appear unescaped as a key, so most blocks skip the copy.
    if '"cache_control"' not in text:
        return text, None
    found: list[Any] = []
    text = _ENCODER.encode(_strip_markers(value, found))
    return text, found[-1]


_DICT, _LIST = object(), object()


def _freeze(value: Any) -> Any:
    """A hashable key equal for equal JSON values (same key order), cheap to build."""
    kind = type(value)
    if kind is str:
        return value
    if kind is dict or isinstance(value, Mapping):
        return (_DICT, tuple([(key, _freeze(item)) for key, item in value.items()]))
    if kind is list or kind is tuple:
        return (_LIST, tuple([_freeze(item) for item in value]))
    return (kind, value)  # tagged, so that 1, 1.0 and True stay apart


class BlockMemo:
    """Encoding, token count and content digest of each distinct block, computed once.

    Successive requests repeat almost every block, so the JSON encoding (the expensive
    part) runs once per distinct block; equal values are found through `_freeze`.
    """

    def __init__(self, count_tokens: TokenCounter) -> None:
        self._count = count_tokens
        self._known: dict[Any, tuple[bytes, int, Any]] = {}
        # By compared text: a block that gains or loses a marker is counted once.
        self._texts: dict[str, tuple[bytes, int]] = {}

    def __call__(self, value: Any) -> tuple[bytes, int, Any]:
        key = _freeze(value)
        known = self._known.get(key)
        if known is None:
            text, marker = _encode(value)
            counted = self._texts.get(text)
            if counted is None:
                tokens = int(self._count(text))
                if tokens < 0:
                    raise CacheSimError(
                        f"the token counter returned {tokens} for a block; counts are >= 0."
                    )
                counted = self._texts[text] = (
                    _blake2b(text.encode(), digest_size=16).digest(),
                    tokens,
                )
            known = self._known[key] = (*counted, marker)
        return known


class _Builder:
    def __init__(self, provider: str, memo: BlockMemo) -> None:
        self.provider = provider
        self.memo = memo
        self.blocks: list[Block] = []
        self.cumulative: list[int] = []
        self.prefixes: list[bytes] = []
        self._total = 0
        self._prefix = b""

    def add(self, ref: BlockRef, value: Any) -> None:
        content, tokens, marker = self.memo(value)
        # A prefix is identified by every block's place (section, positions, role) and
        # compared text, chained: one short hash per block.
        place = f"{ref.section}\x00{ref.index}\x00{ref.block}\x00{ref.role}\x00".encode()
        self._prefix = _blake2b(self._prefix + place + content, digest_size=16).digest()
        self._total += tokens
        self.prefixes.append(self._prefix)
        self.cumulative.append(self._total)
        self.blocks.append(Block(ref, tokens, content, marker))


def _list_of(body: Mapping[str, Any], key: str) -> list[Any]:
    value = body.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise CacheSimError(f"request body `{key}` must be a list, got {type(value).__name__}.")
    return value


def _text_blocks(content: object, where: str) -> list[Any]:
    # A string is the API's shorthand for one text block; both forms render the same prompt.
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if isinstance(content, list):
        for j, block in enumerate(content):
            if not _is_mapping(block):
                raise CacheSimError(f"{where} block #{j} must be an object.")
        return content
    raise CacheSimError(f"{where} must be a string or a list of blocks.")


def _message(message: object, k: int) -> Mapping[str, Any]:
    if not _is_mapping(message) or not isinstance(message.get("role"), str):
        raise CacheSimError(f"message #{k} must be an object with a string `role`.")
    return message


def linearise(provider: str, body: Mapping[str, Any], count_tokens: TokenCounter) -> Linearised:
    """Put `body` in `provider`'s prefix order with cumulative token counts.

    Raises CacheSimError for an unknown provider or a malformed body.
    """
    return linearise_with(provider, body, BlockMemo(count_tokens))


def linearise_with(provider: str, body: Mapping[str, Any], memo: BlockMemo) -> Linearised:
    """`linearise` sharing `memo`'s encodings and counts (the simulator keeps one)."""
    if provider not in SIMULATED_PROVIDERS:
        raise CacheSimError(
            f"cannot simulate caching for provider {provider!r}; use one of "
            f"{', '.join(SIMULATED_PROVIDERS)}."
        )
    if not _is_mapping(body):
        raise CacheSimError("the request body must be an object.")
    out = _Builder(provider, memo)
    for i, tool in enumerate(_list_of(body, "tools")):
        out.add(BlockRef(SECTION_TOOLS, i), tool)
    automatic = None
    if provider == PROVIDER_ANTHROPIC_MESSAGES:
        system = body.get("system")
        if system is not None:
            for i, block in enumerate(_text_blocks(system, "system")):
                out.add(BlockRef(SECTION_SYSTEM, i), block)
        for k, message in enumerate(_list_of(body, "messages")):
            role = _message(message, k)["role"]
            for j, block in enumerate(_text_blocks(message.get("content"), f"message #{k}")):
                if is_thinking_part(block) and "cache_control" in block:
                    raise CacheSimError(
                        f"message #{k} block #{j}: anthropic-messages refuses cache_control on "
                        f"a {block['type']} block; mark a later block."
                    )
                out.add(BlockRef(SECTION_MESSAGES, k, j, role), block)
        automatic = body.get("cache_control")
    else:
        for k, message in enumerate(_list_of(body, "messages")):
            out.add(BlockRef(SECTION_MESSAGES, k, None, _message(message, k)["role"]), message)
    return Linearised(
        provider=provider,
        blocks=tuple(out.blocks),
        cumulative=tuple(out.cumulative),
        prefixes=tuple(out.prefixes),
        automatic=automatic,
    )


# --------------------------------------------------------------------------- divergence


@dataclass(frozen=True)
class Divergence:
    """Where two consecutive requests first differ.

    kind: `identical`; `appended` (the current request extends the previous one: the cache
    is not broken); `truncated` (the current request is a prefix of the previous one); or
    `changed` (block `position` differs). `shared_tokens` counts the common prefix.
    """

    kind: Literal["identical", "appended", "truncated", "changed"]
    position: int | None
    previous: BlockRef | None
    current: BlockRef | None
    shared_tokens: int

    def describe(self) -> str:
        if self.kind == "appended" and self.current is not None:
            return f"append from {self.current.describe()}"
        if self.kind == "truncated" and self.previous is not None:
            return f"truncated before {self.previous.describe()}"
        if self.kind == "changed" and self.current is not None:
            return f"first change at {self.current.describe()}"
        return "identical requests"


def first_divergence(previous: Linearised, current: Linearised) -> Divergence:
    """Find the first block where `current` differs from `previous` (same provider)."""
    if previous.provider != current.provider:
        raise CacheSimError(
            f"cannot compare a {previous.provider} request with a {current.provider} request."
        )
    common = min(len(previous.blocks), len(current.blocks))
    position = next(
        # Prefix hashes chain every block's place and text: the first unequal one is there.
        (i for i in range(common) if previous.prefixes[i] != current.prefixes[i]),
        None,
    )
    if position is not None:
        return Divergence(
            kind="changed",
            position=position,
            previous=previous.blocks[position].ref,
            current=current.blocks[position].ref,
            shared_tokens=current.tokens_through(position - 1),
        )
    shared = current.tokens_through(common - 1)
    if len(previous.blocks) == len(current.blocks):
        return Divergence("identical", None, None, None, shared)
    if len(current.blocks) > common:
        return Divergence("appended", common, None, current.blocks[common].ref, shared)
    return Divergence("truncated", common, previous.blocks[common].ref, None, shared)
