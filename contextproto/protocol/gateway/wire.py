"""What the client formats share (contract §14): a parsed request, a reply, usage, errors, and
the seam every client API implements (`ClientWire`, with its `StreamEncoder`).

Each wire module turns its API's request body into a `GatewayRequest` and a `Reply` back into
its API's reply, stream events and error shape. Everything here
is data: ids and times are passed in, so equal inputs give byte-equal replies.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Literal, Protocol

from contextproto.protocol import errors, json_texts
from contextproto.protocol.client_state import ClientToolWire
from contextproto.protocol.custom_tools import KIND_CUSTOM, KIND_FUNCTION
from contextproto.protocol.gateway.transcript import Call, Item
from contextproto.protocol.parameters import Parameters

# The registered codes of a body the wire formats cannot take.
INVALID_REQUEST = errors.INVALID_REQUEST
PARAMETER_UNSUPPORTED = errors.GATEWAY_PARAMETER_UNSUPPORTED

# A reply's end, in OpenAI's words; the Anthropic side maps them (contract §14).
Finish = Literal["stop", "tool_calls", "length"]
FINISH_STOP: Finish = "stop"
FINISH_TOOL_CALLS: Finish = "tool_calls"
FINISH_LENGTH: Finish = "length"

# The client API's error type for an HTTP status (contract §14: Anthropic's names).
ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    409: "invalid_request_error",
    413: "invalid_request_error",
    422: "invalid_request_error",
    429: "rate_limit_error",
    503: "overloaded_error",
}


def error_type(status: int) -> str:
    if status in ERROR_TYPES:
        return ERROR_TYPES[status]
    return "api_error" if status >= 500 else "invalid_request_error"


class ClientFormat(StrEnum):
    """The API a gateway client speaks (its base URL says which)."""

    OPENAI = "openai"  # Chat Completions
    ANTHROPIC = "anthropic"  # Messages
    RESPONSES = "responses"  # the Responses API (contract §21)


class WireError(Exception):
    """A request body the gateway cannot take: a registered code, what to fix, where."""

    def __init__(self, code: str, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.details: dict[str, Any] = {"field": field} if field is not None else {}


@dataclass(frozen=True)
class ClientTool:
    """A tool the client declared. `kind` `custom` is a free-form tool (contract §21): its
    `input_schema` is custom_tools.CUSTOM_INPUT_SCHEMA and `custom_format` the grammar or text
    format the client gave (None: free text)."""

    name: str
    description: str
    input_schema: dict[str, Any]
    where: str  # where the request declared it, for refusals (`tools[2]`)
    kind: str = KIND_FUNCTION
    custom_format: dict[str, Any] | None = None

    def to_wire(self) -> ClientToolWire:
        wire: ClientToolWire = {
            "name": self.name,
            "description": self.description,
            "inputSchema": self.input_schema,
        }
        if self.kind == KIND_CUSTOM:
            wire["kind"] = KIND_CUSTOM
            wire["format"] = self.custom_format
        return wire


@dataclass(frozen=True)
class CompactionItem:
    """A `compaction` item of a request's input (contract §21): its opaque `token` (the
    item's `encrypted_content`), and `at`, the number of the request's `items` before it (the
    user messages the compaction answer gave back with it)."""

    token: str
    at: int
    item_id: str | None = None


@dataclass(frozen=True)
class GatewayRequest:
    """A client's request, in neither API's words.

    `items` are its messages as transcript items (system text aside, in `system`);
    `tools` its tools (empty when it sent none); `ignored` the request fields the gateway
    does not use (reported in `X-Contextproto-Ignored`).

    The Responses API's own (contract §21; the other wires leave the defaults):
    `previous_response_id` the response the request continues; `store` false when the reply
    must not be retrievable or continued by id; `include_encrypted_reasoning` whether reasoning
    items carry their `encrypted_content`; `compaction` the last `compaction` item of the input
    (what it stands for is implied, `items[compaction.at:]` follows it); `compaction_trigger`
    the input ends with Codex's `compaction_trigger` item (answer one compaction item);
    `echo` the request fields a reply object repeats, with OpenAI's defaults filled in.
    """

    format: ClientFormat
    model: str | None
    system: str
    items: tuple[Item, ...]
    tools: tuple[ClientTool, ...]
    parameters: Parameters
    stream: bool = False
    include_usage: bool = False
    ignored: tuple[str, ...] = ()
    previous_response_id: str | None = None
    store: bool = True
    include_encrypted_reasoning: bool = False
    compaction: CompactionItem | None = None
    compaction_trigger: bool = False
    echo: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Usage:
    """Tokens of the model calls of a request, in contract §8's convention (input includes the
    cache reads and writes)."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read: int = 0
    cache_write: int = 0
    reasoning_tokens: int = 0  # part of output_tokens (OpenAI's convention)

    def plus(self, other: Usage) -> Usage:
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cache_read=self.cache_read + other.cache_read,
            cache_write=self.cache_write + other.cache_write,
            reasoning_tokens=self.reasoning_tokens + other.reasoning_tokens,
        )

    @property
    def uncached_input(self) -> int:
        return max(self.input_tokens - self.cache_read - self.cache_write, 0)

    @classmethod
    def from_recorded(cls, usage: Mapping[str, Any] | None) -> Usage:
        """From a turn's usage as the runtime records it (`inputTokens`, …)."""
        usage = usage or {}

        def count(key: str) -> int:
            value = usage.get(key)
            return (
                int(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0
            )

        return cls(
            input_tokens=count("inputTokens"),
            output_tokens=count("outputTokens"),
            cache_read=count("cacheReadInputTokens") or count("cachedInputTokens"),
            cache_write=count("cacheWriteInputTokens"),
            reasoning_tokens=count("reasoningTokens"),
        )

    def to_json(self) -> dict[str, int]:
        """As recorded (`from_recorded` reads it back); reasoning tokens only when counted."""
        out = {
            "inputTokens": self.input_tokens,
            "outputTokens": self.output_tokens,
            "cacheReadInputTokens": self.cache_read,
            "cacheWriteInputTokens": self.cache_write,
        }
        if self.reasoning_tokens:
            out["reasoningTokens"] = self.reasoning_tokens
        return out


@dataclass(frozen=True)
class Reply:
    """What the gateway answers one request with, in neither API's words.

    For the Responses API (the other wires ignore them): `reasoning` the reasoning items of the
    request's answers as stored (content parts `{"type": "reasoning", "id", "summary",
    "encryptedContent"?}`, in answer order); `message_at` how many of them come before the
    message item in `output` (None: all of them; a stream whose reasoning arrived after its
    text began says where, StreamEncoder.final); `completed` when the reply was finished (Unix
    seconds; None: `created`); `compaction` the token of a compaction answer (its one output
    item).
    """

    id: str
    created: int
    model: str
    text: str
    call: Call | None
    finish: Finish
    usage: Usage = field(default_factory=Usage)
    reasoning: tuple[dict[str, Any], ...] = ()
    message_at: int | None = None
    completed: int | None = None
    compaction: str | None = None

    def to_json(self) -> dict[str, Any]:
        """As stored with the request's record; keys of the Responses fields only when set, so
        a reply of the other wires is stored as it always was."""
        call: dict[str, Any] | None = None
        if self.call is not None:
            call = {"id": self.call.id, "name": self.call.name, "arguments": self.call.arguments}
            if self.call.kind != KIND_FUNCTION:
                call["kind"] = self.call.kind
        out: dict[str, Any] = {
            "id": self.id,
            "created": self.created,
            "model": self.model,
            "text": self.text,
            "call": call,
            "finish": self.finish,
            "usage": self.usage.to_json(),
        }
        if self.reasoning:
            out["reasoning"] = [dict(item) for item in self.reasoning]
        if self.message_at is not None:
            out["messageAt"] = self.message_at
        if self.completed is not None:
            out["completed"] = self.completed
        if self.compaction is not None:
            out["compaction"] = self.compaction
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Reply:
        call = data.get("call")
        message_at = data.get("messageAt")
        completed = data.get("completed")
        return cls(
            id=data["id"],
            created=int(data["created"]),
            model=data["model"],
            text=data.get("text") or "",
            call=Call(
                id=call["id"],
                name=call["name"],
                arguments=call["arguments"],
                kind=call.get("kind", KIND_FUNCTION),
            )
            if isinstance(call, Mapping)
            else None,
            finish=data["finish"],
            usage=Usage.from_recorded(data.get("usage")),
            reasoning=tuple(dict(item) for item in data.get("reasoning") or ()),
            message_at=int(message_at) if message_at is not None else None,
            completed=int(completed) if completed is not None else None,
            compaction=data.get("compaction"),
        )


@dataclass(frozen=True)
class ListedModel:
    """One entry of a models list: a published version by its gateway name."""

    name: str
    created: int  # Unix seconds
    owner: str


class StreamEncoder(Protocol):
    """One streamed reply in a client API's event grammar: each method returns the text of the
    events to send (possibly ""). One encoder per reply; it keeps the stream's own counters."""

    def start(self, usage: Usage) -> str:
        """The stream's opening events; `usage` is what is known when the first model call
        answered (the request's input tokens so far)."""
        ...

    def text(self, delta: str) -> str:
        """Text of the reply as it arrives."""
        ...

    def reasoning(self, item: Mapping[str, Any]) -> str:
        """A reasoning item of an answer, complete (only a wire that shows them sends it)."""
        ...

    def finish(self, reply: Reply) -> str:
        """The client-tool call (if any), the end and the usage, then the stream's last event."""
        ...

    def error(self, status: int, code: str, message: str, details: Mapping[str, Any]) -> str:
        """A failure after the stream began, in the API's own error event."""
        ...

    def keepalive(self) -> str:
        """Something that keeps the connection open while the model works."""
        ...

    def whole(self, reply: Reply) -> str:
        """A stored reply as one whole stream (a replayed request that asks for a stream)."""
        ...

    def final(self, reply: Reply) -> Reply:
        """`reply` as this stream sent it (the order of its output, where the wire has one):
        what to store, so a replay or a later read gives the object the stream ended with.
        Call it once the reply is complete, before `finish`."""
        ...


class ClientWire(Protocol):
    """One client API the gateway speaks (contract §14): the only place that knows its words.

    Nothing outside the implementations branches on the client format; `WIRES`
    (contextproto/protocol/gateway/wires.py) maps each format to its implementation.
    """

    format: ClientFormat
    title: str  # what operators read: "OpenAI Chat Completions"
    max_tokens_field: str  # the request's output limit, in this API's words
    reply_id_prefix: str  # "chatcmpl-", "msg_", "resp_": a reply's id is prefix + 32 hex

    def parse(self, body: Any) -> GatewayRequest:
        """Read a request body; raise WireError naming what to fix."""
        ...

    def referenced_replies(self, body: Any) -> tuple[str, ...]:
        """The ids of earlier replies whose items `body` names instead of sending them (the
        Responses API's `item_reference`); () for an API without references."""
        ...

    def with_references(self, body: Any, replies: Sequence[Mapping[str, Any]]) -> Any:
        """`body` with its references replaced by the items of `replies` (those replies'
        stored bodies); raise WireError naming a reference they do not hold."""
        ...

    def render_reply(self, reply: Reply, request: GatewayRequest) -> dict[str, Any]:
        """The API's reply object (a wire may echo fields of `request`)."""
        ...

    def encoder(
        self, request: GatewayRequest, *, reply_id: str, created: int, model: str
    ) -> StreamEncoder:
        """A stream of one reply to `request`."""
        ...

    def error_reply_body(
        self, status: int, code: str, message: str, details: Mapping[str, Any]
    ) -> dict[str, Any]:
        """The API's error shape with this service's code in it."""
        ...

    def models_list(self, models: Sequence[ListedModel]) -> dict[str, Any]:
        """`GET …/models`."""
        ...

    def token_count(self, tokens: int) -> dict[str, Any]:
        """The answer of the API's token-count endpoint for a view of `tokens` tokens."""
        ...


class WithoutReferences:
    """A `ClientWire` part for an API whose requests name no earlier reply items."""

    @staticmethod
    def referenced_replies(body: Any) -> tuple[str, ...]:
        return ()

    @staticmethod
    def with_references(body: Any, replies: Sequence[Mapping[str, Any]]) -> Any:
        return body


def dumps(value: Any) -> str:
    """The JSON text of every reply body and event: compact, UTF-8 kept as is."""
    return json_texts.compact(value)


# --------------------------------------------------------------------------- parsing helpers


def require_object(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise WireError(INVALID_REQUEST, f"{where} must be a JSON object.", where)
    return value


def optional_int(body: Mapping[str, Any], key: str, *, minimum: int = 0) -> int | None:
    value = body.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise WireError(INVALID_REQUEST, f"{key} must be an integer of at least {minimum}.", key)
    return value


def optional_number(body: Mapping[str, Any], key: str, low: float, high: float) -> float | None:
    value = body.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= high:
        raise WireError(INVALID_REQUEST, f"{key} must be a number from {low:g} to {high:g}.", key)
    return float(value)


def optional_bool(body: Mapping[str, Any], key: str) -> bool:
    value = body.get(key, False)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise WireError(INVALID_REQUEST, f"{key} must be true or false.", key)
    return value


def string_list(value: Any, key: str, *, limit: int) -> tuple[str, ...]:
    """A string or a list of strings (at most `limit`), as a tuple."""
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise WireError(INVALID_REQUEST, f"{key} must be a string or a list of strings.", key)
    if len(value) > limit:
        raise WireError(INVALID_REQUEST, f"{key} takes at most {limit} strings.", key)
    return tuple(value)


def data_url_image(url: str) -> dict[str, Any]:
    """An image part for a URL: `data:` URLs become inline data (their media type kept)."""
    if url.startswith("data:") and ";base64," in url:
        media, _, data = url[5:].partition(";base64,")
        return {"type": "image", "mediaType": media or "application/octet-stream", "data": data}
    return {"type": "image", "mediaType": _media_type_of(url), "url": url}


_IMAGE_SUFFIXES = {
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".gif": "image/gif",
    ".webp": "image/webp",
}


def _media_type_of(url: str) -> str:
    path = url.split("?", 1)[0].lower()
    for suffix, media in _IMAGE_SUFFIXES.items():
        if path.endswith(suffix):
            return media
    return "image/*"
