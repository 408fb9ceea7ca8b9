"""The model provider contract (contract §7): one request in, one `ModelReply` out.

A provider consumes the body one engine adapter produced (`wire_format` names which)
and answers with text and/or tool calls plus token usage, three ways: `complete` (blocking:
the Celery runtime), `acomplete` (awaited: a gateway request, whose cancellation closes the
upstream call) and `astream` (the upstream's own stream: text as it arrives, then the
whole reply). Providers never retry: the job layer owns retries and reads
`ProviderError.retryable` to decide.
"""

from __future__ import annotations

import asyncio
import os
import re
import threading
import weakref
from collections.abc import AsyncGenerator, Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Protocol, runtime_checkable

from django.conf import settings

# The codes are registered in contextproto.errors (PROVIDER_UNKNOWN is the engine's):
# unavailable (connection, timeout, 5xx) and rate limited (429) are retryable; request
# rejected (other 4xx) and response invalid (an answer we cannot read) are not.
from contextproto.errors import (
    PROVIDER_NOT_CONFIGURED,
    PROVIDER_RATE_LIMITED,
    PROVIDER_REQUEST_REJECTED,
    PROVIDER_RESPONSE_INVALID,
    PROVIDER_UNAVAILABLE,
)
from contextproto.errors import retryable as registry_retryable
from contextproto.protocol import tokens
from contextproto.protocol.adapters import WireFormat

RUNNABLE_PROVIDERS = ("scripted", "openai", "anthropic")
DEFAULT_TIMEOUT_SECONDS = 60.0


class SharedHttpClient[Client]:
    """One HTTP client per process for a provider SDK: its connection pool and TLS context.

    An SDK client built per call builds its own HTTP client, and with it an SSL context that
    loads the CA bundle (40-60 ms of CPU on these machines, more than the rest of the call),
    and opens a new connection every call (a TLS handshake with a real provider). The SDK
    clients stay per call (key, base URL and timeout belong to the call and are never kept);
    only the transport is shared, which the SDKs' HTTP clients allow across threads. A
    forked child (a Celery prefork worker) makes its own instead of using its parent's
    sockets.
    """

    def __init__(self, factory: Callable[[], Client]) -> None:
        self._factory = factory
        self._lock = threading.Lock()
        self._client: Client | None = None
        self._pid = 0

    def get(self) -> Client:
        with self._lock:
            client = self._client
            if client is None or self._pid != os.getpid() or getattr(client, "is_closed", False):
                client = self._client = self._factory()
                self._pid = os.getpid()
            return client


class SharedAsyncHttpClient[Client]:
    """One async HTTP client per event loop (and process) for a provider SDK's async client.

    An async client's connections belong to the loop that opened them: uvicorn runs one loop
    per worker process, so this is one client per worker; a caller on another loop (a test's
    `async_to_sync`) gets its own, and a closed loop's client is dropped with it.
    """

    def __init__(self, factory: Callable[[], Client]) -> None:
        self._factory = factory
        self._lock = threading.Lock()
        self._clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Client] = (
            weakref.WeakKeyDictionary()
        )

    def get(self) -> Client:
        loop = asyncio.get_running_loop()
        with self._lock:
            client = self._clients.get(loop)
            if client is None or getattr(client, "is_closed", False):
                client = self._clients[loop] = self._factory()
            return client


@dataclass(frozen=True)
class ToolCallRequest:
    """One tool call the model asked for."""

    id: str
    name: str
    arguments: Any  # a JSON object, or the text the model wrote when it is none


@dataclass(frozen=True)
class ModelReply:
    """What the model answered for one turn.

    `usage` always has int `inputTokens` and `outputTokens`; `"estimated": True` marks
    counts we computed instead of the provider. `raw` is the provider's response as
    JSON-compatible data for the snapshot. `notes` lists what parsing had to change
    (e.g. tool arguments that were not a JSON object). `thinking`: an Anthropic answer's
    thinking / redacted_thinking blocks as the model gave them (signatures included), or a
    Responses answer's reasoning items as content parts `{"type": "reasoning", "id",
    "summary", "encryptedContent"?}`; stored with the answer and sent back unchanged to the
    provider's own API only (contract §3.1, §4.5).
    """

    text: str | None
    tool_calls: tuple[ToolCallRequest, ...]
    usage: dict
    stop_reason: str | None
    raw: dict | None = None
    notes: tuple[str, ...] = ()
    thinking: tuple[dict, ...] = ()


@dataclass(frozen=True)
class TextChunk:
    """Text of the answer as the upstream streams it."""

    text: str


@dataclass(frozen=True)
class ReasoningChunk:
    """One complete reasoning item of the answer (a Responses upstream), as the content part the
    answer stores (`{"type": "reasoning", "id", "summary", "encryptedContent"?}`): what a
    `StreamEncoder.reasoning` takes."""

    item: dict[str, Any]


# What `astream` yields: chunks as they come, and last the whole reply (exactly one).
StreamPiece = TextChunk | ReasoningChunk | ModelReply


class ProviderError(Exception):
    """A model call that failed: a stable snake_case `code` and whether a retry may help."""

    def __init__(
        self,
        code: str,
        message: str,
        *,
        retryable: bool | None = None,
        details: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        # The registry's flag for the code unless the caller knows better.
        self.retryable = registry_retryable(code) if retryable is None else retryable
        self.details = details or {}

    def as_dict(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "message": self.message,
            "retryable": self.retryable,
            "details": self.details,
        }


@runtime_checkable
class ModelProvider(Protocol):
    """A model the runtime can drive."""

    wire_format: WireFormat

    def complete(
        self,
        request: dict,
        *,
        model: str,
        max_output_tokens: int | None = None,
        step: int | None = None,
    ) -> ModelReply:
        """Answer `request` (an adapter body in `wire_format`).

        `step` is the 0-based number of model calls this model already answered in the
        session (the caller's durable counter). Only the scripted model uses it; real
        providers ignore it.
        """
        ...

    async def acomplete(self, request: dict, *, model: str, step: int | None = None) -> ModelReply:
        """`complete`, awaited: cancelling the awaiting task closes the upstream call."""
        ...

    def astream(
        self, request: dict, *, model: str, step: int | None = None
    ) -> AsyncGenerator[StreamPiece, None]:
        """The upstream's own stream: `TextChunk`s (and `ReasoningChunk`s) as they arrive, then
        the same `ModelReply` `complete` would give, last. Closing the iterator closes the
        upstream stream."""
        ...


# --------------------------------------------------------------------------- helpers


# The engine's one estimator and the JSON it measures (contextproto/protocol/tokens.py), under
# the names the providers and their callers use.
estimate_tokens = tokens.text_tokens
canonical_json = tokens.canonical_json


def tool_calls_json(calls: tuple[ToolCallRequest, ...]) -> str:
    if not calls:
        return ""
    return canonical_json([{"id": c.id, "name": c.name, "arguments": c.arguments} for c in calls])


def estimated_usage(request: Any, text: str | None, calls: tuple[ToolCallRequest, ...]) -> dict:
    """Usage when nobody reported one: estimated from the request and the answer."""
    return {
        "inputTokens": tokens.json_tokens(request),
        "outputTokens": estimate_tokens((text or "") + tool_calls_json(calls)),
        "estimated": True,
    }


_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def storable_reply(reply: ModelReply) -> ModelReply:
    """The reply with NUL and lone surrogates replaced by U+FFFD, noted if anything changed.

    No database stores them (see contextproto.parsers, which refuses them from API callers);
    a model's answer cannot be refused, so the runtime records the nearest faithful text.
    """
    changed: list[bool] = []

    def clean(value: Any) -> Any:
        if isinstance(value, str):
            cleaned = _UNSTORABLE.sub("\ufffd", value)
            if cleaned != value:
                changed.append(True)
            return cleaned
        if isinstance(value, dict):
            return {clean(k): clean(v) for k, v in value.items()}
        if isinstance(value, list):
            return [clean(v) for v in value]
        return value

    text = clean(reply.text)
    thinking = tuple(clean(block) for block in reply.thinking)
    calls = tuple(
        ToolCallRequest(id=clean(c.id), name=clean(c.name), arguments=clean(c.arguments))
        for c in reply.tool_calls
    )
    raw = clean(reply.raw)
    if not changed:
        return reply
    note = "NUL or lone surrogate characters in the answer were replaced by U+FFFD"
    return replace(
        reply, text=text, tool_calls=calls, raw=raw, thinking=thinking, notes=(*reply.notes, note)
    )


@dataclass(frozen=True)
class Connection:
    """Where and how a real provider is reached."""

    base_url: str
    api_key: str | None  # None: the call goes without a key (CallOptions.require_key)
    timeout: float


@dataclass(frozen=True)
class CallOptions:
    """How a request-driven run reaches its model (contract §14), beside the version's config.

    `api_key`: the client's `X-Contextproto-Upstream-Key`, used for this request's calls
    only (never stored); it wins over `apiKeyEnv`. `require_key=False`: with no key at all
    the call goes without one (local upstreams need none) instead of failing before it is
    sent. `timeout`: seconds to wait for an answer, instead of the config's.
    """

    api_key: str | None = None
    require_key: bool = True
    timeout: float | None = None


def connection_from(
    config: Mapping[str, Any],
    *,
    label: str,
    base_url_setting: str,
    api_key_setting: str,
    default_base_url: str,
    options: CallOptions | None = None,
) -> Connection:
    """Resolve base URL, key and timeout: AgentVersion config first, then Django settings.

    `config.baseUrl` overrides the setting; `config.apiKeyEnv` names an environment
    variable holding the key. Read at call time, never at import. Raises
    `provider_not_configured` when no key can be found, so an SDK never falls back to
    credentials we did not choose (unless `options` say a call may go without one; its
    `api_key` comes first).
    """
    options = options or CallOptions()
    base_url = config.get("baseUrl") or getattr(settings, base_url_setting, None)
    key_env = config.get("apiKeyEnv")
    if options.api_key:
        api_key: str | None = options.api_key
    elif key_env:
        api_key = os.environ.get(str(key_env))
        if not api_key:
            if options.require_key:
                raise ProviderError(
                    PROVIDER_NOT_CONFIGURED,
                    f"{label}: model config names apiKeyEnv={key_env!r} but that environment "
                    "variable is empty or not set.",
                    details={"apiKeyEnv": key_env},
                )
    else:
        api_key = getattr(settings, api_key_setting, None)
    if not api_key and options.require_key:
        raise ProviderError(
            PROVIDER_NOT_CONFIGURED,
            f"{label}: no API key; set {api_key_setting} or the version's model config apiKeyEnv.",
            details={"setting": api_key_setting},
        )
    timeout = options.timeout or config.get("timeoutSeconds", DEFAULT_TIMEOUT_SECONDS)
    if not isinstance(timeout, int | float) or isinstance(timeout, bool) or timeout <= 0:
        raise ProviderError(
            PROVIDER_NOT_CONFIGURED,
            f"{label}: timeoutSeconds must be a positive number, got {timeout!r}.",
            details={"timeoutSeconds": timeout},
        )
    return Connection(
        base_url=str(base_url or default_base_url), api_key=api_key or None, timeout=float(timeout)
    )


def unreadable_answer(label: str, exc: BaseException) -> ProviderError:
    """An upstream answer that is not the provider's format (not JSON, an HTML page, cut
    short): the gateway answers 502 for it, never 500 (contract §14)."""
    return ProviderError(
        PROVIDER_RESPONSE_INVALID,
        f"{label}: the answer is not the provider's format ({type(exc).__name__}: {exc})",
        details={"reason": "unreadable"},
    )


def status_error(
    label: str,
    status: int,
    provider_message: str | None,
    *,
    details: dict[str, Any] | None = None,
) -> ProviderError:
    """Map an HTTP error status to our codes (429 and 408/409/5xx retryable; other 4xx not)."""
    details = {"status": status, "providerMessage": provider_message, **(details or {})}
    said = f": {provider_message}" if provider_message else ""
    if status == 429:
        return ProviderError(
            PROVIDER_RATE_LIMITED,
            f"{label} rate-limited the request (HTTP 429){said}",
            retryable=True,
            details=details,
        )
    # 408 and 409 are transient on both APIs (their SDKs retry them too).
    if status >= 500 or status in (408, 409):
        return ProviderError(
            PROVIDER_UNAVAILABLE,
            f"{label} failed to answer (HTTP {status}){said}",
            retryable=True,
            details=details,
        )
    return ProviderError(
        PROVIDER_REQUEST_REJECTED,
        f"{label} rejected the request (HTTP {status}){said}",
        details=details,
    )


def retry_after_seconds(headers: Mapping[str, str] | None) -> float | None:
    """The server's requested wait, from `retry-after-ms` or `retry-after` (seconds)."""
    if not headers:
        return None
    for name, scale in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            return float(value) / scale
        except ValueError:
            continue
    return None
