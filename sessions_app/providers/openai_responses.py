"""OpenAI's Responses API through the `openai` SDK (contract §4.5, §21): the `openai` provider of
a version whose `model.config.api` is `"responses"`.

Consumes the `openai-responses` adapter body `{"instructions"?, "input", "tools"?,
"parallel_tool_calls"?, "prompt_cache_key"?, "store": false, "include":
["reasoning.encrypted_content"]}` and a gateway client's forwarded fields, posted as built to
`/responses` (the base URL includes `/v1`, as for Chat Completions). Nothing is stored at the
provider: the service keeps the conversation, and each answer's reasoning items come back with
their encrypted content, stored with the answer (`ModelReply.thinking`) and sent back to this
API only.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Mapping
from typing import Any

import httpx
import openai
from openai.types.responses import Response, ResponseStreamEvent

from contextproto.errors import PROVIDER_RESPONSE_INVALID
from contextproto.protocol.adapters import WireFormat
from contextproto.protocol.answer_parts import read_responses_output, reasoning_part
from sessions_app.providers.base import (
    ModelReply,
    ProviderError,
    ReasoningChunk,
    StreamPiece,
    TextChunk,
    ToolCallRequest,
    estimated_usage,
    status_error,
    unreadable_answer,
)
from sessions_app.providers.openai_chat import (
    LABEL,
    OpenAIUpstream,
    map_error,
    stream_broke_off,
)

PATH = "/responses"
# A failed response's error code, as the HTTP status it stands for (its retry rules).
FAILED_STATUS = {"rate_limit_exceeded": 429, "server_error": 500, "vector_store_timeout": 504}
# Why a response stopped early, in the runtime's words (`length`: the output limit).
INCOMPLETE_STOPS = {"max_output_tokens": "length", "content_filter": "content_filter"}


def _count(value: Any) -> int | None:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _usage(usage_raw: Mapping[str, Any]) -> dict[str, Any]:
    """contract §15 usage of a response: `input_tokens` already counts the cached part."""
    usage: dict[str, Any] = {
        "inputTokens": _count(usage_raw.get("input_tokens")) or 0,
        "outputTokens": _count(usage_raw.get("output_tokens")) or 0,
    }
    details = usage_raw.get("input_tokens_details") or {}
    cached = _count(details.get("cached_tokens"))
    if cached is not None:
        usage["cacheReadInputTokens"] = cached
    written = _count(details.get("cache_write_tokens"))
    if written:
        usage["cacheWriteInputTokens"] = written
    reasoning = _count((usage_raw.get("output_tokens_details") or {}).get("reasoning_tokens"))
    if reasoning is not None:
        usage["reasoningTokens"] = reasoning
    return usage


def failed(error: Any) -> ProviderError:
    """A response that failed at the provider (`status: failed`, or a stream's error event)."""
    error = error if isinstance(error, Mapping) else {}
    code = error.get("code")
    message = error.get("message") if isinstance(error.get("message"), str) else None
    status = FAILED_STATUS.get(str(code), 400 if code else 500)
    return status_error(LABEL, status, message, details={"providerCode": code})


def parse_response(raw: dict[str, Any], request: Mapping[str, Any]) -> ModelReply:
    """Read a `response` object: its output items, usage and why it stopped."""
    if raw.get("status") == "failed":
        raise failed(raw.get("error"))
    output = raw.get("output")
    if not isinstance(output, list):
        raise ProviderError(
            PROVIDER_RESPONSE_INVALID,
            f"{LABEL}: the response has no output list",
            details={"response": raw},
        )
    read = read_responses_output(output, where="output", strict=False)
    notes = list(read.notes)
    calls = tuple(ToolCallRequest(id=c.id, name=c.name, arguments=c.arguments) for c in read.calls)
    usage_raw = raw.get("usage")
    if isinstance(usage_raw, Mapping) and _count(usage_raw.get("input_tokens")) is not None:
        usage = _usage(usage_raw)
    else:
        usage = estimated_usage(request, read.text, calls)
        notes.append(f"{LABEL}: the response reported no usage; token counts are estimates")
    stop = "tool_calls" if calls else "stop"
    if raw.get("status") == "incomplete":
        reason = (raw.get("incomplete_details") or {}).get("reason")
        stop = INCOMPLETE_STOPS.get(str(reason), str(reason or "incomplete"))
    return ModelReply(
        text=read.text,
        tool_calls=calls,
        usage=usage,
        stop_reason=stop,
        raw=raw,
        notes=tuple(notes),
        thinking=read.thinking,
    )


class OpenAIResponsesProvider(OpenAIUpstream):
    """The Responses API via the SDK's `post` of the adapter body to `/responses`.

    Config as the Chat Completions provider's: `baseUrl`, `apiKeyEnv`, `timeoutSeconds` (60),
    `maxOutputTokens` (sent as `max_output_tokens` when the body has none), and `api:
    "responses"`, which chose this provider.
    """

    wire_format = WireFormat.OPENAI_RESPONSES

    def _body(self, request: dict, model: str, max_output_tokens: int | None) -> dict[str, Any]:
        body: dict[str, Any] = {"model": model, **request}
        if not body.get("tools"):
            body.pop("tools", None)
        limit = max_output_tokens or self.config.get("maxOutputTokens")
        if limit and "max_output_tokens" not in body:
            body["max_output_tokens"] = int(limit)
        # The service keeps the conversation; a body built elsewhere says so too.
        body.setdefault("store", False)
        return body

    def complete(
        self,
        request: dict,
        *,
        model: str,
        max_output_tokens: int | None = None,
        step: int | None = None,
    ) -> ModelReply:
        """Send one Responses request; raise ProviderError on any failure. The body goes as
        built (the snapshot stores what was sent), posted by the SDK without its transforms."""
        body = self._body(request, model, max_output_tokens)
        return parse_response(self._post(PATH, body, Response), request)

    async def acomplete(self, request: dict, *, model: str, step: int | None = None) -> ModelReply:
        body = self._body(request, model, None)
        return parse_response(await self._apost(PATH, body, Response), request)

    async def astream(
        self, request: dict, *, model: str, step: int | None = None
    ) -> AsyncGenerator[StreamPiece, None]:
        """The Responses API with `stream: true`: text deltas as they come, each reasoning item
        when it is done (its encrypted content complete), then the reply `complete` would give,
        read from the final `response.completed` (or `.incomplete`) object."""
        body = {**self._body(request, model, None), "stream": True}
        final: dict[str, Any] | None = None
        done: dict[int, dict[str, Any]] = {}  # output items as each was done, by index
        try:
            stream = await self._async_client().post(
                PATH,
                cast_to=Response,
                body=body,
                options=self._options(),
                stream=True,
                stream_cls=openai.AsyncStream[ResponseStreamEvent],
            )
            async with stream:
                async for event in stream:
                    if event.type == "response.output_text.delta":
                        if event.delta:
                            yield TextChunk(event.delta)
                    elif event.type == "response.output_item.done":
                        item = event.item.to_dict(mode="json")
                        done[event.output_index] = item
                        if item.get("type") == "reasoning":
                            yield ReasoningChunk(reasoning_part(item))
                    elif event.type in ("response.completed", "response.incomplete"):
                        final = event.response.to_dict(mode="json")
                    elif event.type == "response.failed":
                        raise failed(event.response.to_dict(mode="json").get("error"))
                    elif event.type == "error":
                        raise failed(event.to_dict(mode="json"))
        except openai.OpenAIError as exc:
            raise map_error(exc) from exc
        except httpx.TransportError as exc:  # the connection dropped mid-stream
            raise stream_broke_off(exc) from exc
        except (ValueError, httpx.HTTPError, AttributeError) as exc:  # not the API's events
            raise unreadable_answer(LABEL, exc) from exc
        if final is None:
            raise unreadable_answer(LABEL, ValueError("the stream ended before its response"))
        if not final.get("output") and done:
            # Some servers end with the response's fields only; the items were each done.
            final["output"] = [done[index] for index in sorted(done)]
        yield parse_response(final, request)
