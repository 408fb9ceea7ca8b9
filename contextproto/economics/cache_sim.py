"""Prompt-cache simulator: replay provider requests under each provider's documented rules.

Given the request bodies the adapters build (`openai-chat`: `{messages, tools,
prompt_cache_key?}`; `anthropic-messages`: `{system, messages, tools}` with optional
`cache_control` markers), their send times and a token counter, it returns per turn the
input tokens that a provider would bill as cache reads, cache writes and uncached input.
Every figure is an estimate: the token counter is injected (reports use cl100k_base, see
`contextproto/tokens.py`) and the providers' rules below are models of their documentation.
Requests are compared in the provider's prefix order (`linearise.py` says what a block is).

Rules, and where they come from (the providers' prompt-caching guides as stored for this
work; neither page shows a date; retrieved December 2026):
* OpenAI (developers.openai.com/api/docs/guides/prompt-caching): caching is automatic for
  prompts of 1024 tokens or more; a hit needs an exact prefix match (tools included); the
  cached count grows in 128-token increments above 1024 (the guide's earlier revision, also
  quoted by third-party guides); `prompt_cache_key` is combined with the prefix hash for
  routing (here: requests with different keys never share, and a request without a key
  shares only with others without one); in-memory retention keeps a prefix "5 to 10 minutes
  of inactivity", always dropped "within one hour of last use" (the same wording on the
  Azure OpenAI page); `prompt_cache_retention: "24h"` keeps it up to 24 hours. Defaults here:
  300 s after last use (the lower bound), 24 h for "24h". No write charge. (The newest
  revision of the guide adds explicit breakpoints and a 1.25x write price for the GPT-5.6
  family onwards; that is not simulated.)
* Anthropic (platform.claude.com/docs/en/build-with-claude/prompt-caching): entries are
  written only at breakpoints: a block with `cache_control: {"type": "ephemeral", "ttl"?}`,
  or, with a top-level `cache_control` (automatic caching, generally available since
  February 2026), the last cacheable block; at most 4 per request (the automatic one counts,
  a 5th is a 400); prefix order tools -> system -> messages; at each breakpoint the API looks
  for an entry at that block's prefix and at the boundaries of up to 20 blocks before it
  (here: the breakpoint's own block and the 20 before it); the longest hit is read; writes
  cover from the hit (or 0) to the last breakpoint whose prefix was not cached, and every
  such breakpoint's prefix becomes an entry; a prefix below the model's minimum cacheable
  length is neither written nor read; TTL "5m" (default) or "1h", refreshed at no cost by
  each read; a 1h breakpoint may not follow a 5m one; with mixed TTLs the write is billed
  as 1h from the hit to the last 1h breakpoint and 5m from there to the last breakpoint (the
  guide's section on mixing TTLs). Prices relative to input: read 0.1x, 5m write 1.25x,
  1h write 2x. Entries are scoped by model. Thinking and redacted_thinking blocks of earlier
  assistant turns count as blocks (for the lookback too) and by their JSON as sent, signature
  included: the guide says they are cached as part of the prefix and cannot carry a marker
  (one there is refused). Models that drop earlier turns' thinking from the prompt bill
  less than that, so the figures err on the high side.
  Minimum cacheable lengths (`ANTHROPIC_MIN_CACHEABLE_TOKENS`): the guide's table as quoted
  in anthropic-sdk-python issue 1194 (early 2026): 4096 Opus 4.6 / 4.5 and Haiku 4.5; 1024
  Sonnet 4.6 / 4.5 / 4, Opus 4.1 / 4, Sonnet 3.7; 2048 Haiku 3.5 / 3. "What's new in Claude
  Opus 4.8" (released May 28, 2026): 1024 for Opus 4.8. Opus 4.7 at 2048 and Opus 5 /
  Fable 5 / Mythos 5 at 512 come from secondary sources that cite the guide (June-July
  2026; others list 4096 for Opus 4.7). An unknown model gets 1024, and the turn says so.

Bad input (an unknown provider, a malformed body, a marker the API refuses, time running
backwards) raises `CacheSimError` with a message saying what to fix: the simulator serves
reports and benchmarks, not API clients.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypedDict

from contextproto.economics.linearise import (
    BlockMemo,
    CacheSimError,
    Linearised,
    TokenCounter,
    linearise_with,
)
from contextproto.protocol.adapters import PROVIDER_OPENAI_CHAT

OPENAI_MIN_CACHED_TOKENS = 1024
OPENAI_CACHE_STEP_TOKENS = 128
OPENAI_IN_MEMORY_RETENTION_SECONDS = 300.0
OPENAI_EXTENDED_RETENTION_SECONDS = 24 * 3600.0

ANTHROPIC_MAX_BREAKPOINTS = 4
ANTHROPIC_LOOKBACK_BLOCKS = 20
ANTHROPIC_TTL_SECONDS = {"5m": 300.0, "1h": 3600.0}
ANTHROPIC_DEFAULT_MIN_CACHEABLE_TOKENS = 1024
# Model id (date and platform suffixes removed) -> minimum cacheable prefix in tokens.
ANTHROPIC_MIN_CACHEABLE_TOKENS: Mapping[str, int] = {
    "claude-opus-5": 512,
    "claude-fable-5": 512,
    "claude-mythos-5": 512,
    "claude-opus-4-8": 1024,
    "claude-opus-4-7": 2048,
    "claude-opus-4-6": 4096,
    "claude-opus-4-5": 4096,
    "claude-haiku-4-5": 4096,
    "claude-sonnet-4-6": 1024,
    "claude-sonnet-4-5": 1024,
    "claude-opus-4-1": 1024,
    "claude-opus-4": 1024,
    "claude-opus-4-0": 1024,
    "claude-sonnet-4": 1024,
    "claude-sonnet-4-0": 1024,
    "claude-3-7-sonnet": 1024,
    "claude-3-5-sonnet": 1024,
    "claude-3-opus": 1024,
    "claude-3-5-haiku": 2048,
    "claude-3-haiku": 2048,
}

SECTION_TOOLS = "tools"
SECTION_SYSTEM = "system"
SECTION_MESSAGES = "messages"

# Rule tags of a simulated turn.
RULE_OPENAI_BELOW_MINIMUM = "openai:below-minimum"
RULE_OPENAI_MISS = "openai:miss"
RULE_OPENAI_HIT = "openai:hit"
RULE_ANTHROPIC_NO_BREAKPOINT = "anthropic:no-breakpoint"
RULE_ANTHROPIC_BELOW_MINIMUM = "anthropic:below-minimum"
RULE_ANTHROPIC_READ = "anthropic:read"
RULE_ANTHROPIC_WRITE = "anthropic:write"
RULE_ANTHROPIC_READ_WRITE = "anthropic:read+write"


# --------------------------------------------------------------------------- replay


@dataclass(frozen=True)
class Turn:
    """One request as sent: wire format, body, send time (seconds) and model.

    `min_cacheable_tokens` overrides the model's minimum cacheable length.
    """

    provider: str
    body: Mapping[str, Any]
    sent_at: float
    model: str | None = None
    min_cacheable_tokens: int | None = None


class TurnCacheWire(TypedDict):
    inputTokens: int
    cacheReadTokens: int
    cacheWriteTokens: int
    cacheWrite1hTokens: int
    uncachedTokens: int
    rule: str
    detail: str


@dataclass(frozen=True)
class TurnCache:
    """What one request would be billed as: every figure an estimate.

    `input_tokens` = `cache_read_tokens` + `cache_write_tokens` + `uncached_tokens`;
    `cache_write_1h_tokens` is the part of the writes made with a 1-hour TTL.
    """

    input_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int
    cache_write_1h_tokens: int
    uncached_tokens: int
    rule: str
    detail: str

    def to_wire(self) -> TurnCacheWire:
        return {
            "inputTokens": self.input_tokens,
            "cacheReadTokens": self.cache_read_tokens,
            "cacheWriteTokens": self.cache_write_tokens,
            "cacheWrite1hTokens": self.cache_write_1h_tokens,
            "uncachedTokens": self.uncached_tokens,
            "rule": self.rule,
            "detail": self.detail,
        }


_DATE_SUFFIX = re.compile(r"(?:[-@]\d{8}|-latest|-v\d+(?::\d+)?|:\w+)$")


def anthropic_min_cacheable_tokens(model: str | None) -> tuple[int, str]:
    """The minimum cacheable prefix of an Anthropic `model`, and where the figure comes from.

    Platform prefixes (`anthropic/`, `us.anthropic.`) and date or version suffixes are
    ignored; a model not in `ANTHROPIC_MIN_CACHEABLE_TOKENS` gets 1024.
    """
    if not model:
        return ANTHROPIC_DEFAULT_MIN_CACHEABLE_TOKENS, "no model given: default 1024"
    name = model.lower()
    start = name.find("claude")
    name = name[start:] if start >= 0 else name
    while True:
        shorter = _DATE_SUFFIX.sub("", name)
        if shorter == name:
            break
        name = shorter
    known = ANTHROPIC_MIN_CACHEABLE_TOKENS.get(name)
    if known is not None:
        return known, f"{name}: {known}"
    return ANTHROPIC_DEFAULT_MIN_CACHEABLE_TOKENS, f"{model} not in the table: default 1024"


@dataclass
class _Entry:
    expires_at: float
    ttl: float


def _marker_ttl(marker: object, where: str) -> float:
    if not isinstance(marker, Mapping) or marker.get("type") != "ephemeral":
        raise CacheSimError(f'cache_control on {where} must be {{"type": "ephemeral"}}.')
    ttl = marker.get("ttl", "5m")
    if ttl not in ANTHROPIC_TTL_SECONDS:
        raise CacheSimError(f'cache_control ttl on {where} must be "5m" or "1h", got {ttl!r}.')
    return ANTHROPIC_TTL_SECONDS[ttl]


def _ttl_name(seconds: float) -> str:
    return next(name for name, value in ANTHROPIC_TTL_SECONDS.items() if value == seconds)


class CacheSimulator:
    """Replays requests in send order and keeps each provider's cache between them.

    `count_tokens(text) -> int` counts one block's text; it is called once per distinct
    block. One simulator may replay both providers; their caches are separate.
    """

    def __init__(
        self,
        count_tokens: TokenCounter,
        *,
        openai_retention_seconds: float = OPENAI_IN_MEMORY_RETENTION_SECONDS,
    ) -> None:
        self._memo = BlockMemo(count_tokens)
        self._openai_retention = float(openai_retention_seconds)
        # (model, prompt_cache_key, prefix hash) -> expiry time.
        self._openai: dict[tuple[str, str | None, bytes], float] = {}
        # (model, prefix hash) -> entry written at a breakpoint.
        self._anthropic: dict[tuple[str, bytes], _Entry] = {}
        self._now = float("-inf")
        self._pruned_at_size = 1024

    def linearise(self, provider: str, body: Mapping[str, Any]) -> Linearised:
        """`linearise` with this simulator's counter (its token counts are shared)."""
        return linearise_with(provider, body, self._memo)

    def replay(self, turn: Turn) -> TurnCache:
        """Simulate `turn`, sent after every turn replayed before it."""
        if turn.sent_at < self._now:
            raise CacheSimError(
                f"turns must be replayed in send order: {turn.sent_at} is before {self._now}."
            )
        if turn.min_cacheable_tokens is not None and turn.min_cacheable_tokens < 0:
            raise CacheSimError("min_cacheable_tokens must be >= 0.")
        self._now = float(turn.sent_at)
        request = self.linearise(turn.provider, turn.body)
        if turn.provider == PROVIDER_OPENAI_CHAT:
            result = self._openai_turn(turn, request)
        else:
            result = self._anthropic_turn(turn, request)
        self._prune()
        return result

    # ----------------------------------------------------------------------- OpenAI

    def _openai_turn(self, turn: Turn, request: Linearised) -> TurnCache:
        now = self._now
        key = turn.body.get("prompt_cache_key")
        scope = (turn.model or "", None if key is None else str(key))
        retention = self._openai_retention
        if turn.body.get("prompt_cache_retention") == "24h":
            retention = OPENAI_EXTENDED_RETENTION_SECONDS
        minimum = (
            OPENAI_MIN_CACHED_TOKENS
            if turn.min_cacheable_tokens is None
            else turn.min_cacheable_tokens
        )
        # Every prefix of a request is stored together, so a match of prefix i implies one
        # of every shorter prefix: walk forward until the first miss.
        matched = 0
        for prefix in request.prefixes:
            expires = self._openai.get((*scope, prefix))
            if expires is None or expires <= now:
                break
            matched += 1
        shared = request.tokens_through(matched - 1)
        # Never shorten a 24 h prefix: a shorter prefix must outlive every longer one.
        until = now + retention
        table = self._openai
        for prefix in request.prefixes:
            entry = (*scope, prefix)
            if table.get(entry, until) <= until:
                table[entry] = until
        total = request.total_tokens
        if total < minimum:
            cached, rule = 0, RULE_OPENAI_BELOW_MINIMUM
            detail = f"prompt of {total} tokens is below the {minimum}-token minimum"
        elif shared < minimum:
            cached, rule = 0, RULE_OPENAI_MISS
            detail = (
                f"longest prefix shared with a request of the last {retention:g} s "
                f"(key {scope[1]!r}) is {shared} tokens, below {minimum}"
            )
        else:
            cached = shared // OPENAI_CACHE_STEP_TOKENS * OPENAI_CACHE_STEP_TOKENS
            rule = RULE_OPENAI_HIT
            detail = (
                f"shares {shared} tokens ({matched} blocks) with an earlier request "
                f"(key {scope[1]!r}); cached {cached} in {OPENAI_CACHE_STEP_TOKENS}-token steps"
            )
        return TurnCache(
            input_tokens=total,
            cache_read_tokens=cached,
            cache_write_tokens=0,
            cache_write_1h_tokens=0,
            uncached_tokens=total - cached,
            rule=rule,
            detail=detail,
        )

    # ----------------------------------------------------------------------- Anthropic

    def _breakpoints(self, request: Linearised) -> dict[int, float]:
        """Block position -> TTL seconds of every breakpoint, checked as the API checks them."""
        points: dict[int, float] = {}
        for i, block in enumerate(request.blocks):
            if block.marker is not None:
                points[i] = _marker_ttl(block.marker, block.ref.describe())
        if request.automatic is not None and request.blocks:
            ttl = _marker_ttl(request.automatic, "the request (automatic caching)")
            points.setdefault(len(request.blocks) - 1, ttl)
        if len(points) > ANTHROPIC_MAX_BREAKPOINTS:
            where = ", ".join(request.blocks[i].ref.describe() for i in sorted(points))
            raise CacheSimError(
                f"anthropic-messages allows at most {ANTHROPIC_MAX_BREAKPOINTS} cache "
                f"breakpoints (the automatic one included); this request has {len(points)}: "
                f"{where}."
            )
        short_seen = None
        for i in sorted(points):
            if points[i] == ANTHROPIC_TTL_SECONDS["5m"]:
                short_seen = short_seen if short_seen is not None else i
            elif short_seen is not None:
                raise CacheSimError(
                    f"a 1h breakpoint ({request.blocks[i].ref.describe()}) may not follow a 5m "
                    f"one ({request.blocks[short_seen].ref.describe()}): longer TTLs come first."
                )
        return points

    def _anthropic_turn(self, turn: Turn, request: Linearised) -> TurnCache:
        now = self._now
        points = self._breakpoints(request)
        total = request.total_tokens
        if turn.min_cacheable_tokens is not None:
            minimum, source = turn.min_cacheable_tokens, f"override {turn.min_cacheable_tokens}"
        else:
            minimum, source = anthropic_min_cacheable_tokens(turn.model)
        if not points:
            return TurnCache(
                input_tokens=total,
                cache_read_tokens=0,
                cache_write_tokens=0,
                cache_write_1h_tokens=0,
                uncached_tokens=total,
                rule=RULE_ANTHROPIC_NO_BREAKPOINT,
                detail="no cache_control breakpoint: nothing is cached",
            )
        scope = turn.model or ""
        cum = request.cumulative
        order = sorted(points)

        # Reads: per breakpoint, the longest entry at its block or up to 20 blocks before.
        hit = -1
        best_read = ""
        for point in order:
            for position in range(point, max(-1, point - ANTHROPIC_LOOKBACK_BLOCKS - 1), -1):
                if cum[position] < minimum:
                    break  # shorter prefixes are shorter still
                entry = self._anthropic.get((scope, request.prefixes[position]))
                if entry is not None and entry.expires_at > now:
                    entry.expires_at = now + entry.ttl  # a read refreshes the entry
                    if position > hit:
                        hit, back = position, point - position
                        best_read = (
                            f"read {cum[position]} through "
                            f"{request.blocks[position].ref.describe()}"
                            + (f" (lookback {back} from the breakpoint)" if back else "")
                        )
                    break
        read = request.tokens_through(hit)

        # Writes: every breakpoint beyond the hit whose prefix reaches the minimum.
        written = [p for p in order if p > hit and cum[p] >= minimum]
        for point in written:
            self._anthropic[(scope, request.prefixes[point])] = _Entry(
                now + points[point], points[point]
            )
        write = write_1h = 0
        if written:
            long_ones = [p for p in written if points[p] == ANTHROPIC_TTL_SECONDS["1h"]]
            through_1h = cum[long_ones[-1]] if long_ones else read
            write_1h = through_1h - read
            write = cum[written[-1]] - read

        short = [p for p in order if cum[p] < minimum]
        parts = []
        if best_read:
            parts.append(best_read)
        if written:
            ttls = "/".join(sorted({_ttl_name(points[p]) for p in written}))
            parts.append(
                f"wrote {write} through {request.blocks[written[-1]].ref.describe()} ({ttls})"
            )
        if short:
            parts.append(f"{len(short)} breakpoint(s) below the minimum {minimum} ({source})")
        if read and write:
            rule = RULE_ANTHROPIC_READ_WRITE
        elif read:
            rule = RULE_ANTHROPIC_READ
        elif write:
            rule = RULE_ANTHROPIC_WRITE
        else:
            rule = RULE_ANTHROPIC_BELOW_MINIMUM
        return TurnCache(
            input_tokens=total,
            cache_read_tokens=read,
            cache_write_tokens=write,
            cache_write_1h_tokens=write_1h,
            uncached_tokens=total - read - write,
            rule=rule,
            detail="; ".join(parts) or "nothing read or written",
        )

    def _prune(self) -> None:
        """Drop expired entries once the tables have doubled (keeps replay linear)."""
        size = len(self._openai) + len(self._anthropic)
        if size < 2 * self._pruned_at_size:
            return
        now = self._now
        self._openai = {k: v for k, v in self._openai.items() if v > now}
        self._anthropic = {k: v for k, v in self._anthropic.items() if v.expires_at > now}
        self._pruned_at_size = max(1024, len(self._openai) + len(self._anthropic))


def simulate(
    turns: Iterable[Turn],
    count_tokens: TokenCounter,
    *,
    openai_retention_seconds: float = OPENAI_IN_MEMORY_RETENTION_SECONDS,
) -> list[TurnCache]:
    """Replay `turns` (in send order) on a fresh simulator; one result per turn."""
    simulator = CacheSimulator(count_tokens, openai_retention_seconds=openai_retention_seconds)
    return [simulator.replay(turn) for turn in turns]
