"""OpenAI Chat Completions (and any OpenAI-compatible endpoint) through the `openai` SDK.

Consumes the `openai-chat` adapter body `{"messages", "tools"?, "prompt_cache_key"?}`. The
base URL includes the API version prefix (`https://api.openai.com/v1`); the SDK appends
`/chat/completions`.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Mapping
from typing import Any

import httpx
import openai
from openai.lib.streaming.chat import ChatCompletionStreamState
from openai.types.chat import ChatCompletion, ChatCompletionChunk

from contextproto.errors import (
    PROVIDER_NOT_CONFIGURED,
    PROVIDER_RESPONSE_INVALID,
    PROVIDER_UNAVAILABLE,
)
from contextproto.protocol.adapters import WireFormat
from contextproto.protocol.answer_parts import read_openai_message
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

LABEL = "openai"
DEFAULT_BASE_URL = "https://api.openai.com/v1"
# `max_tokens` is deprecated on OpenAI and refused by its reasoning models; some older
# compatible servers only know `max_tokens` (config `maxTokensParam`).
MAX_TOKENS_PARAMS = ("max_completion_tokens", "max_tokens")
# A placeholder the SDK insists on; the Authorization header it would make is omitted.
NO_KEY = "no-key"
PATH = "/chat/completions"
# The process's HTTP client for every call (the SDK's defaults: limits, redirects).
HTTP = SharedHttpClient(openai.DefaultHttpxClient)
ASYNC_HTTP = SharedAsyncHttpClient(openai.DefaultAsyncHttpxClient)


def _provider_message(body: Any) -> str | None:
    # The SDK hands over the body's `error` object when there is one.
    if isinstance(body, Mapping):
        message = body.get("message")
        if isinstance(message, str):
            return message
        error = body.get("error")
        if isinstance(error, Mapping) and isinstance(error.get("message"), str):
            return error["message"]
    if isinstance(body, str) and body:
        return body[:500]
    return None


def map_error(exc: openai.OpenAIError) -> ProviderError:
    """Translate an SDK exception into our codes (never lets an SDK type escape)."""
    if isinstance(exc, openai.APIConnectionError):  # includes APITimeoutError
        timed_out = isinstance(exc, openai.APITimeoutError)
        return ProviderError(
            PROVIDER_UNAVAILABLE,
            f"{LABEL}: {'timed out' if timed_out else 'could not connect'} ({exc.message})",
            retryable=True,
            details={"reason": "timeout" if timed_out else "connection"},
        )
    if isinstance(exc, openai.APIStatusError):
        body = exc.body if isinstance(exc.body, Mapping) else {}
        details = {
            "providerCode": body.get("code"),
            "providerType": body.get("type"),
            "requestId": exc.request_id,
            "retryAfterSeconds": retry_after_seconds(exc.response.headers),
        }
        return status_error(LABEL, exc.status_code, _provider_message(exc.body), details=details)
    if isinstance(exc, openai.APIResponseValidationError):
        return ProviderError(PROVIDER_RESPONSE_INVALID, f"{LABEL}: {exc.message}")
    return ProviderError(PROVIDER_NOT_CONFIGURED, f"{LABEL}: {exc}")


def sdk_json(answer: object, expected: type[openai.BaseModel]) -> dict[str, Any]:
    """The SDK's answer as JSON; the SDK hands back the text of a body that is not JSON (an
    HTML error page with a 200) instead of raising."""
    if not isinstance(answer, expected):
        raise ValueError(f"a {type(answer).__name__} body, not a {expected.__name__}")
    return answer.to_dict(mode="json")


def stream_broke_off(exc: httpx.TransportError) -> ProviderError:
    """A stream whose connection dropped mid-way: retryable, as a connection failure is."""
    return ProviderError(
        PROVIDER_UNAVAILABLE,
        f"{LABEL}: the stream broke off ({type(exc).__name__}: {exc})",
        retryable=True,
        details={"reason": "connection"},
    )


class OpenAIUpstream:
    """What the OpenAI providers share (Chat Completions, the Responses API): the connection
    (`model.config` and the server's settings), the SDK's clients over the process's shared
    HTTP clients, and a body posted as built (the SDK's `post`, as its README shows for any
    endpoint, with no request transform), its failures in our codes."""

    def __init__(self, config: Mapping[str, Any], options: CallOptions | None = None) -> None:
        self.config = dict(config)
        self.connection = connection_from(
            self.config,
            label=LABEL,
            base_url_setting="OPENAI_BASE_URL",
            api_key_setting="OPENAI_API_KEY",
            default_base_url=DEFAULT_BASE_URL,
            options=options,
        )

    def _options(self) -> Any:
        # No key: no Authorization header at all (local upstreams need none).
        return (
            {"headers": {"Authorization": openai.Omit()}} if self.connection.api_key is None else {}
        )

    def _client_args(self) -> dict[str, Any]:
        return {
            "base_url": self.connection.base_url,
            "api_key": self.connection.api_key or NO_KEY,
            "timeout": self.connection.timeout,
            "max_retries": 0,  # the job layer owns retries
        }

    def _async_client(self) -> openai.AsyncOpenAI:
        # An SDK client per call (key, base URL, timeout), over the process's shared HTTP
        # client; not closed, since closing it would close the shared one.
        return openai.AsyncOpenAI(**self._client_args(), http_client=ASYNC_HTTP.get())

    def _post(
        self, path: str, body: dict[str, Any], cast_to: type[openai.BaseModel]
    ) -> dict[str, Any]:
        try:
            client = openai.OpenAI(**self._client_args(), http_client=HTTP.get())
            answer = client.post(path, cast_to=cast_to, body=body, options=self._options())
            return sdk_json(answer, cast_to)
        except openai.OpenAIError as exc:
            raise map_error(exc) from exc
        except (ValueError, httpx.HTTPError) as exc:  # a body that is not the API's JSON
            raise unreadable_answer(LABEL, exc) from exc

    async def _apost(
        self, path: str, body: dict[str, Any], cast_to: type[openai.BaseModel]
    ) -> dict[str, Any]:
        try:
            answer = await self._async_client().post(
                path, cast_to=cast_to, body=body, options=self._options()
            )
            return sdk_json(answer, cast_to)
        except openai.OpenAIError as exc:
            raise map_error(exc) from exc
        except (ValueError, httpx.HTTPError) as exc:
            raise unreadable_answer(LABEL, exc) from exc


def parse_completion(raw: dict[str, Any], request: dict) -> ModelReply:
    """Read `choices[0].message` and `usage` of a chat.completion body."""
    choices = raw.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], Mapping):
        raise ProviderError(
            PROVIDER_RESPONSE_INVALID,
            f"{LABEL}: the response has no choices",
            details={"response": raw},
        )
    choice = choices[0]
    message = choice.get("message") or {}
    read = read_openai_message(message, where="choices[0].message", strict=False)
    notes = list(read.notes)
    text = read.text
    if message.get("refusal"):
        notes.append(f"{LABEL}: the model refused: {message['refusal']}")
    calls = [ToolCallRequest(id=c.id, name=c.name, arguments=c.arguments) for c in read.calls]
    tool_calls = tuple(calls)

    usage_raw = raw.get("usage")
    if isinstance(usage_raw, Mapping) and "prompt_tokens" in usage_raw:
        usage: dict[str, Any] = {
            "inputTokens": int(usage_raw.get("prompt_tokens") or 0),
            "outputTokens": int(usage_raw.get("completion_tokens") or 0),
        }
        # `prompt_tokens` includes the cached part (contract §8's convention already); OpenAI
        # reports no cache writes. Details may be null on compatible servers.
        cached = (usage_raw.get("prompt_tokens_details") or {}).get("cached_tokens")
        if isinstance(cached, int | float) and not isinstance(cached, bool):
            usage["cacheReadInputTokens"] = int(cached)
        reasoning = (usage_raw.get("completion_tokens_details") or {}).get("reasoning_tokens")
        if reasoning is not None:
            usage["reasoningTokens"] = reasoning
    else:
        usage = estimated_usage(request, text, tool_calls)
        notes.append(f"{LABEL}: the response reported no usage; token counts are estimates")
    return ModelReply(
        text=text,
        tool_calls=tool_calls,
        usage=usage,
        stop_reason=choice.get("finish_reason"),
        raw=raw,
        notes=tuple(notes),
    )


class OpenAIChatProvider(OpenAIUpstream):
    """Chat Completions via `openai.OpenAI(...).chat.completions.create`.

    Config: `baseUrl`, `apiKeyEnv`, `timeoutSeconds` (60), `maxOutputTokens` (used
    when the caller gives none; omitted if neither), `maxTokensParam`
    (`max_completion_tokens`, or `max_tokens` for older compatible servers).
    """

    wire_format = WireFormat.OPENAI_CHAT

    def __init__(self, config: Mapping[str, Any], options: CallOptions | None = None) -> None:
        super().__init__(config, options)
        self.max_tokens_param = self.config.get("maxTokensParam", MAX_TOKENS_PARAMS[0])
        if self.max_tokens_param not in MAX_TOKENS_PARAMS:
            raise ProviderError(
                PROVIDER_NOT_CONFIGURED,
                f"{LABEL}: maxTokensParam must be one of {', '.join(MAX_TOKENS_PARAMS)}.",
            )

    def _body(self, request: dict, model: str, max_output_tokens: int | None) -> dict[str, Any]:
        body: dict[str, Any] = {"model": model, **request}
        if not body.get("tools"):
            body.pop("tools", None)
        limit = max_output_tokens or self.config.get("maxOutputTokens")
        if limit and not any(key in body for key in MAX_TOKENS_PARAMS):
            body[self.max_tokens_param] = int(limit)
        return body

    def complete(
        self,
        request: dict,
        *,
        model: str,
        max_output_tokens: int | None = None,
        step: int | None = None,
    ) -> ModelReply:
        """Send one Chat Completions request; raise ProviderError on any failure.

        The body goes as built (messages, tools, `parallel_tool_calls`, `prompt_cache_key`,
        a gateway client's forwarded fields): the snapshot stores what was sent. It is
        posted as it is (the SDK's `post`, as its README shows for any endpoint), not
        through `chat.completions.create`, whose request transform walks every message
        against the SDK's typed dicts to hand back the same JSON: about 110 ms for a view
        of 350 messages on these machines, the larger part of a gateway request's cost.
        """
        body = self._body(request, model, max_output_tokens)
        return parse_completion(self._post(PATH, body, ChatCompletion), request)

    async def acomplete(self, request: dict, *, model: str, step: int | None = None) -> ModelReply:
        body = self._body(request, model, None)
        return parse_completion(await self._apost(PATH, body, ChatCompletion), request)

    async def astream(
        self, request: dict, *, model: str, step: int | None = None
    ) -> AsyncGenerator[StreamPiece, None]:
        """Chat Completions with `stream: true`: content deltas as they come, then the chunks
        put together by the SDK's own accumulator (the reply `complete` would give)."""
        body = {
            **self._body(request, model, None),
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        state = ChatCompletionStreamState()
        try:
            stream = await self._async_client().post(
                PATH,
                cast_to=ChatCompletion,
                body=body,
                options=self._options(),
                stream=True,
                stream_cls=openai.AsyncStream[ChatCompletionChunk],
            )
            async with stream:
                async for chunk in stream:
                    state.handle_chunk(chunk)
                    for choice in chunk.choices[:1]:
                        if choice.delta.content:
                            yield TextChunk(choice.delta.content)
            raw = state.get_final_completion().to_dict(mode="json")
        except openai.OpenAIError as exc:
            raise map_error(exc) from exc
        except httpx.TransportError as exc:  # the connection dropped mid-stream
            raise stream_broke_off(exc) from exc
        except (ValueError, httpx.HTTPError, RuntimeError) as exc:  # not the API's events
            raise unreadable_answer(LABEL, exc) from exc
        yield parse_completion(raw, request)
