"""Anthropic Messages through the `anthropic` SDK.

Consumes the `anthropic-messages` adapter body `{"system"?, "messages", "tools"?}`; `system`
is a string or, with prompt caching, text blocks, and `cache_control` breakpoints ride on
the blocks and tools where the adapter put them (contract §8): all pass to the SDK unchanged.
The base URL is the host only (`https://api.anthropic.com`); the SDK appends `/v1/messages`
and sends `anthropic-version`. The SDK (2.x) sends the key as `Authorization: Bearer`;
we also send the documented `x-api-key` header, so gateways that only know that one work.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Mapping
from typing import Any

import anthropic
import httpx

from contextproto.errors import (
    PROVIDER_NOT_CONFIGURED,
    PROVIDER_RESPONSE_INVALID,
    PROVIDER_UNAVAILABLE,
)
from contextproto.protocol.adapters import WireFormat
from contextproto.protocol.answer_parts import read_anthropic_content
from sessions_app.providers.base import (
    CallOptions,
    ModelReply,
    ProviderError,
    SharedAsyncHttpClient,
    SharedHttpClient,
    StreamPiece,
    TextChunk,
    ToolCallRequest,
    connection_from,
    estimated_usage,
    retry_after_seconds,
    status_error,
    unreadable_answer,
)

LABEL = "anthropic"
DEFAULT_BASE_URL = "https://api.anthropic.com"
DEFAULT_MAX_OUTPUT_TOKENS = 4096
# The process's HTTP client for every call (the SDK's defaults: limits, redirects).
HTTP = SharedHttpClient(anthropic.DefaultHttpxClient)
ASYNC_HTTP = SharedAsyncHttpClient(anthropic.DefaultAsyncHttpxClient)


def map_error(exc: anthropic.AnthropicError) -> ProviderError:
    """Translate an SDK exception into our codes (never lets an SDK type escape)."""
    if isinstance(exc, anthropic.APIConnectionError):  # includes APITimeoutError
        timed_out = isinstance(exc, anthropic.APITimeoutError)
        return ProviderError(
            PROVIDER_UNAVAILABLE,
            f"{LABEL}: {'timed out' if timed_out else 'could not connect'} ({exc.message})",
            retryable=True,
            details={"reason": "timeout" if timed_out else "connection"},
        )
    if isinstance(exc, anthropic.APIStatusError):
        provider_message = exc.api_message
        if provider_message is None and isinstance(exc.body, str) and exc.body:
            provider_message = exc.body[:500]
        details = {
            "providerType": exc.type,
            "providerCode": exc.error_code,
            "requestId": exc.request_id,
            "retryAfterSeconds": retry_after_seconds(exc.response.headers),
        }
        return status_error(LABEL, exc.status_code, provider_message, details=details)
    if isinstance(exc, anthropic.APIResponseValidationError):
        return ProviderError(PROVIDER_RESPONSE_INVALID, f"{LABEL}: {exc.message}")
    return ProviderError(PROVIDER_NOT_CONFIGURED, f"{LABEL}: {exc}")


def _count(usage: Mapping[str, Any], key: str) -> int | None:
    value = usage.get(key)
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _usage(usage_raw: Mapping[str, Any]) -> dict[str, Any]:
    """contract §8 usage of a Messages response.

    `input_tokens` counts only the uncached part; inputTokens is the whole prompt, as on
    OpenAI: uncached + cache reads + cache writes. The writes per TTL (`cache_creation`)
    are kept beside the total.
    """
    uncached = _count(usage_raw, "input_tokens") or 0
    cache_write = _count(usage_raw, "cache_creation_input_tokens")
    cache_read = _count(usage_raw, "cache_read_input_tokens")
    usage: dict[str, Any] = {
        "inputTokens": uncached + (cache_write or 0) + (cache_read or 0),
        "outputTokens": _count(usage_raw, "output_tokens") or 0,
        "uncachedInputTokens": uncached,
    }
    if cache_read is not None:
        usage["cacheReadInputTokens"] = cache_read
    if cache_write is not None:
        usage["cacheWriteInputTokens"] = cache_write
    by_ttl = usage_raw.get("cache_creation")
    if isinstance(by_ttl, Mapping):
        for ttl, key in (("5m", "ephemeral_5m_input_tokens"), ("1h", "ephemeral_1h_input_tokens")):
            count = _count(by_ttl, key)
            if count is not None:
                usage[f"cacheWrite{ttl}InputTokens"] = count
    return usage


def _message_json(message: object) -> dict[str, Any]:
    """The message as JSON; the SDK hands back the text of a body that is not JSON (an HTML
    error page with a 200) instead of raising."""
    if not isinstance(message, anthropic.types.Message):
        raise ValueError(f"a {type(message).__name__} body, not a message")
    return message.to_dict(mode="json")


def parse_message(raw: dict[str, Any], request: dict) -> ModelReply:
    """Read the content blocks and usage of a Messages response body."""
    blocks = raw.get("content")
    if not isinstance(blocks, list):
        raise ProviderError(
            PROVIDER_RESPONSE_INVALID,
            f"{LABEL}: the response has no content list",
            details={"response": raw},
        )
    read = read_anthropic_content(blocks, where="content", strict=False)
    notes = list(read.notes)
    text = read.text
    thinking = read.thinking
    calls = [ToolCallRequest(id=c.id, name=c.name, arguments=c.arguments) for c in read.calls]
    tool_calls = tuple(calls)

    usage_raw = raw.get("usage")
    if isinstance(usage_raw, Mapping) and _count(usage_raw, "input_tokens") is not None:
        usage = _usage(usage_raw)
    else:
        usage = estimated_usage(request, text, tool_calls)
        notes.append(f"{LABEL}: the response reported no usage; token counts are estimates")
    return ModelReply(
        text=text,
        tool_calls=tool_calls,
        usage=usage,
        stop_reason=raw.get("stop_reason"),
        raw=raw,
        notes=tuple(notes),
        thinking=tuple(thinking),
    )


class AnthropicMessagesProvider:
    """Messages via `anthropic.Anthropic(...).messages.create`.

    Config: `baseUrl`, `apiKeyEnv`, `timeoutSeconds` (60), `maxOutputTokens` (4096;
    Anthropic requires `max_tokens`, a caller's `max_output_tokens` wins).
    """

    wire_format = WireFormat.ANTHROPIC_MESSAGES

    def __init__(self, config: Mapping[str, Any], options: CallOptions | None = None) -> None:
        self.config = dict(config)
        self.connection = connection_from(
            self.config,
            label=LABEL,
            base_url_setting="ANTHROPIC_BASE_URL",
            api_key_setting="ANTHROPIC_API_KEY",
            default_base_url=DEFAULT_BASE_URL,
            options=options,
        )

    def _kwargs(self, request: dict, model: str, max_output_tokens: int | None) -> dict[str, Any]:
        kwargs: dict[str, Any] = {"model": model, **request}
        for optional in ("system", "tools"):
            if not kwargs.get(optional):
                kwargs.pop(optional, None)
        if "max_tokens" not in kwargs:
            kwargs["max_tokens"] = int(
                max_output_tokens or self.config.get("maxOutputTokens") or DEFAULT_MAX_OUTPUT_TOKENS
            )
        if self.connection.api_key is None:
            kwargs["extra_headers"] = {"Authorization": anthropic.Omit()}
        return kwargs

    def _client_args(self) -> dict[str, Any]:
        key = self.connection.api_key
        # An explicit api_key keeps the SDK from looking for other credentials (profiles, env).
        return {
            "base_url": self.connection.base_url,
            "api_key": key or "no-key",
            "timeout": self.connection.timeout,
            "max_retries": 0,  # the job layer owns retries
            "default_headers": {"x-api-key": key} if key else {},
        }

    def complete(
        self,
        request: dict,
        *,
        model: str,
        max_output_tokens: int | None = None,
        step: int | None = None,
    ) -> ModelReply:
        """Send one Messages request; raise ProviderError on any failure.

        The body goes as built (system, messages, tools, `tool_choice`, a gateway client's
        forwarded fields): the snapshot stores what was sent. `max_tokens`, which Anthropic
        requires, comes from the body, else the caller, else the config.
        """
        kwargs = self._kwargs(request, model, max_output_tokens)
        try:
            # An SDK client per call (key, base URL, timeout) over the process's shared HTTP
            # client; not closed, since closing it would close the shared one.
            client = anthropic.Anthropic(**self._client_args(), http_client=HTTP.get())
            raw = _message_json(client.messages.create(**kwargs))
        except anthropic.AnthropicError as exc:
            raise map_error(exc) from exc
        except (ValueError, httpx.HTTPError) as exc:  # a body that is not the API's JSON
            raise unreadable_answer(LABEL, exc) from exc
        return parse_message(raw, request)

    def count_tokens(self, request: dict, *, model: str) -> int:
        """The input tokens Anthropic counts for `request` (its count endpoint: no model
        call); raise ProviderError on any failure."""
        kwargs = {
            k: v
            for k, v in self._kwargs(request, model, None).items()
            if k
            in ("model", "messages", "system", "tools", "tool_choice", "thinking", "extra_headers")
        }
        try:
            client = anthropic.Anthropic(**self._client_args(), http_client=HTTP.get())
            counted = client.messages.count_tokens(**kwargs)
        except anthropic.AnthropicError as exc:
            raise map_error(exc) from exc
        except (ValueError, httpx.HTTPError) as exc:
            raise unreadable_answer(LABEL, exc) from exc
        return int(counted.input_tokens)

    async def acomplete(self, request: dict, *, model: str, step: int | None = None) -> ModelReply:
        kwargs = self._kwargs(request, model, None)
        try:
            client = anthropic.AsyncAnthropic(**self._client_args(), http_client=ASYNC_HTTP.get())
            raw = _message_json(await client.messages.create(**kwargs))
        except anthropic.AnthropicError as exc:
            raise map_error(exc) from exc
        except (ValueError, httpx.HTTPError) as exc:
            raise unreadable_answer(LABEL, exc) from exc
        return parse_message(raw, request)

    async def astream(
        self, request: dict, *, model: str, step: int | None = None
    ) -> AsyncGenerator[StreamPiece, None]:
        """Messages with `stream: true`: text deltas as they come, then the message the SDK's
        stream helper puts together (thinking blocks and their signatures included)."""
        kwargs = self._kwargs(request, model, None)
        try:
            client = anthropic.AsyncAnthropic(**self._client_args(), http_client=ASYNC_HTTP.get())
            async with client.messages.stream(**kwargs) as stream:
                async for event in stream:
                    if event.type == "text" and event.text:
                        yield TextChunk(event.text)
                raw = (await stream.get_final_message()).to_dict(mode="json")
        except anthropic.AnthropicError as exc:
            raise map_error(exc) from exc
        except httpx.TransportError as exc:  # the connection dropped mid-stream
            raise ProviderError(
                PROVIDER_UNAVAILABLE,
                f"{LABEL}: the stream broke off ({type(exc).__name__}: {exc})",
                retryable=True,
                details={"reason": "connection"},
            ) from exc
        except (ValueError, httpx.HTTPError, RuntimeError, AssertionError) as exc:
            raise unreadable_answer(LABEL, exc) from exc
        yield parse_message(raw, request)
