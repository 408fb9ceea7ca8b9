"""Drive the gateway with the official `openai` and `anthropic` SDKs, one scenario for both.

`Chat(fmt, base, key, stream=...)` sends a conversation the way each SDK's users write it
(Chat Completions `messages` with `tools`, or Messages with `system` and `tools`), streamed
through the SDK's own stream helper or not, and reads the reply back into one `Result`.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import anthropic
import openai

Tool = tuple[str, str, dict[str, Any]]  # name, description, JSON schema

LOOKUP: Tool = (
    "lookup",
    "Weather for a city.",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)


@dataclass
class Result:
    text: str
    call: tuple[str, str, dict[str, Any]] | None  # id, name, arguments
    finish: str  # stop | tool_calls | length, in OpenAI's words for both APIs
    usage: dict[str, int]
    headers: Mapping[str, str]
    message: dict[str, Any]  # the assistant message to send back, in the client's format
    model: str

    @property
    def session(self) -> str:
        return self.headers["x-contextproto-session"]


STOPS = {"end_turn": "stop", "tool_use": "tool_calls", "max_tokens": "length"}


class Chat:
    """One client of the gateway in `fmt` ("openai" or "anthropic")."""

    def __init__(self, fmt: str, base: str, key: str, *, stream: bool = False, **options: Any):
        self.fmt, self.base, self.key, self.stream = fmt, base, key, stream
        options.setdefault("max_retries", 0)
        if fmt == "openai":
            self.client: Any = openai.OpenAI(
                base_url=f"{base}/gateway/openai/v1", api_key=key, **options
            )
        else:
            self.client = anthropic.Anthropic(
                base_url=f"{base}/gateway/anthropic", api_key=key, **options
            )

    # ------------------------------------------------------------------ messages

    def user(self, text: str) -> dict[str, Any]:
        return {"role": "user", "content": text}

    def tool_result(self, call_id: str, text: str) -> dict[str, Any]:
        if self.fmt == "openai":
            return {"role": "tool", "tool_call_id": call_id, "content": text}
        return {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": call_id, "content": text}],
        }

    def assistant(self, text: str) -> dict[str, Any]:
        if self.fmt == "openai":
            return {"role": "assistant", "content": text}
        return {"role": "assistant", "content": [{"type": "text", "text": text}]}

    def _tools(self, tools: list[Tool] | None) -> Any:
        if not tools:
            return openai.omit if self.fmt == "openai" else anthropic.omit
        if self.fmt == "openai":
            return [
                {
                    "type": "function",
                    "function": {"name": n, "description": d, "parameters": s},
                }
                for n, d, s in tools
            ]
        return [{"name": n, "description": d, "input_schema": s} for n, d, s in tools]

    # ------------------------------------------------------------------ sending

    def send(
        self,
        messages: list[dict[str, Any]],
        *,
        model: str = "helper",
        system: str | None = None,
        tools: list[Tool] | None = None,
        headers: dict[str, str] | None = None,
        **params: Any,
    ) -> Result:
        if self.fmt == "openai":
            return self._openai(messages, model, system, tools, headers or {}, params)
        return self._anthropic(messages, model, system, tools, headers or {}, params)

    def _openai(self, messages, model, system, tools, headers, params) -> Result:
        sent = ([{"role": "system", "content": system}] if system else []) + messages
        kwargs = dict(model=model, messages=sent, tools=self._tools(tools), **params)
        completions = self.client.chat.completions
        if self.stream:
            kwargs.setdefault("stream_options", {"include_usage": True})
            with completions.stream(extra_headers=headers, **kwargs) as stream:
                for _event in stream:
                    pass
                completion = stream.get_final_completion()
                response_headers = stream._response.headers
        else:
            raw = completions.with_raw_response.create(extra_headers=headers, **kwargs)
            completion, response_headers = raw.parse(), raw.headers
        choice = completion.choices[0]
        message = choice.message
        call = None
        if message.tool_calls:
            first = message.tool_calls[0]
            call = (first.id, first.function.name, json.loads(first.function.arguments))
        back: dict[str, Any] = {"role": "assistant", "content": message.content}
        if message.tool_calls:
            back["tool_calls"] = [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.function.name, "arguments": c.function.arguments},
                }
                for c in message.tool_calls
            ]
        usage = completion.usage
        return Result(
            text=message.content or "",
            call=call,
            finish=choice.finish_reason,
            usage={
                "input": usage.prompt_tokens,
                "output": usage.completion_tokens,
                "cached": usage.prompt_tokens_details.cached_tokens,
            }
            if usage
            else {},
            headers=response_headers,
            message=back,
            model=completion.model,
        )

    def _anthropic(self, messages, model, system, tools, headers, params) -> Result:
        params.setdefault("max_tokens", 1024)
        kwargs = dict(model=model, messages=messages, tools=self._tools(tools), **params)
        if system:
            kwargs["system"] = system
        if self.stream:
            with self.client.messages.stream(extra_headers=headers, **kwargs) as stream:
                for _event in stream:
                    pass
                message = stream.get_final_message()
                response_headers = stream.response.headers
        else:
            raw = self.client.messages.with_raw_response.create(extra_headers=headers, **kwargs)
            message, response_headers = raw.parse(), raw.headers
        texts = [b.text for b in message.content if b.type == "text"]
        uses = [b for b in message.content if b.type == "tool_use"]
        call = (uses[0].id, uses[0].name, dict(uses[0].input)) if uses else None
        blocks: list[dict[str, Any]] = []
        for block in message.content:
            if block.type == "text":
                blocks.append({"type": "text", "text": block.text})
            elif block.type == "tool_use":
                blocks.append(
                    {"type": "tool_use", "id": block.id, "name": block.name, "input": block.input}
                )
        usage = message.usage
        cached = usage.cache_read_input_tokens or 0
        return Result(
            text="".join(texts),
            call=call,
            finish=STOPS.get(message.stop_reason or "", message.stop_reason or ""),
            usage={
                "input": usage.input_tokens + cached + (usage.cache_creation_input_tokens or 0),
                "output": usage.output_tokens,
                "cached": cached,
            },
            headers=response_headers,
            message={"role": "assistant", "content": blocks},
            model=message.model,
        )

    def error(self, messages: list[dict[str, Any]], **kwargs: Any) -> Any:
        """Send expecting a refusal; return the SDK's APIStatusError."""
        errors = (openai.APIStatusError, anthropic.APIStatusError)
        try:
            self.send(messages, **kwargs)
        except errors as exc:
            return exc
        raise AssertionError("the gateway answered instead of refusing")


def error_code(exc: Any) -> str:
    """The gateway's code from an SDK error (`error.code` in both APIs' shapes)."""
    body = exc.body
    if isinstance(body, dict) and "error" in body and isinstance(body["error"], dict):
        return body["error"].get("code")
    return body.get("code") if isinstance(body, dict) else None


def post(url: str, body: Any, headers: dict[str, str]) -> tuple[int, dict[str, str], bytes]:
    """A plain POST (no SDK): status, lower-cased headers, the body's bytes."""
    request = urllib.request.Request(
        url,
        data=json.dumps(body).encode(),
        method="POST",
        headers={"Content-Type": "application/json", **headers},
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return (
                response.status,
                {k.lower(): v for k, v in response.headers.items()},
                response.read(),
            )
    except urllib.error.HTTPError as exc:
        return exc.code, {k.lower(): v for k, v in exc.headers.items()}, exc.read()
