"""A Responses API reply as Server-Sent Events (contract §21), in the order the official SDK's
stream helper requires (`openai/lib/streaming/responses/_responses.py`).

`response.created` and `response.in_progress` open the stream; each output item is
`response.output_item.added` … `response.output_item.done`, a message's text between
`response.content_part.added` and `.done` as `response.output_text.delta`s, a call's
arguments (a custom call's input) as deltas and a done event; `response.completed` (or
`response.incomplete`) carries the same object as the reply without streaming; a failure
after the start is `response.failed`. Every event has `type` and an increasing
`sequence_number`; items go out one at a time.

Text streams as it arrives. A reasoning item that arrives while the message is open (a later
answer's, after a protocol call) cannot precede the message any more: it follows it. A reply
read off the log says the same (`Reply.message_at`: the reasoning of the answers through the
first that wrote text comes first), so the stored reply renders the `output` the stream ended
with; `final` gives the stream's order where a stream was shown its items otherwise.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from contextproto.protocol.custom_tools import call_input_text
from contextproto.protocol.gateway.responses_render import (
    COMPACTION_PREFIX,
    MESSAGE_PREFIX,
    REASONING_PREFIX,
    arguments_text,
    call_item,
    compaction_item,
    error_object,
    is_custom_call,
    message_item,
    output_item_id,
    output_text,
    reasoning_item,
    render_reply,
    response_object,
)
from contextproto.protocol.gateway.wire import GatewayRequest, Reply, Usage, dumps


class ResponsesStream:
    """The events of one streamed reply; one encoder per reply (it counts the sequence)."""

    def __init__(self, request: GatewayRequest, *, reply_id: str, created: int, model: str) -> None:
        self.request = request
        self.reply_id, self.created, self.model = reply_id, created, model
        self.sequence = 0
        self.items = 0  # output items opened so far (the next one's output_index)
        self.reasoning_sent = 0  # reasoning items sent before the message opened
        self.message_index: int | None = None  # the open message's output_index
        self.streamed = ""  # the message's text so far
        self.held: list[Mapping[str, Any]] = []  # reasoning that arrived after the text began

    def _event(self, kind: str, data: dict[str, Any]) -> str:
        payload = {"type": kind, **data, "sequence_number": self.sequence}
        self.sequence += 1
        return f"event: {kind}\ndata: {dumps(payload)}\n\n"

    def _snapshot(self, status: str) -> dict[str, Any]:
        return response_object(
            reply_id=self.reply_id,
            created=self.created,
            model=self.model,
            request=self.request,
            status=status,
            output=[],
            usage=None,
        )

    def start(self, usage: Usage | None = None) -> str:
        return self._event("response.created", {"response": self._snapshot("in_progress")}) + (
            self._event("response.in_progress", {"response": self._snapshot("in_progress")})
        )

    # ------------------------------------------------------------------ items

    def _message_id(self) -> str:
        assert self.message_index is not None
        return output_item_id(self.reply_id, MESSAGE_PREFIX, self.message_index)

    def _open_message(self) -> str:
        self.message_index = self.items
        self.items += 1
        item_id = self._message_id()
        return self._event(
            "response.output_item.added",
            {
                "output_index": self.message_index,
                "item": message_item("", item_id, status="in_progress"),
            },
        ) + self._event(
            "response.content_part.added",
            {
                "item_id": item_id,
                "output_index": self.message_index,
                "content_index": 0,
                "part": output_text(""),
            },
        )

    def text(self, delta: str) -> str:
        if not delta:
            return ""
        out = self._open_message() if self.message_index is None else ""
        self.streamed += delta
        return out + self._event(
            "response.output_text.delta",
            {
                "item_id": self._message_id(),
                "output_index": self.message_index,
                "content_index": 0,
                "delta": delta,
                "logprobs": [],
            },
        )

    def reasoning(self, item: Mapping[str, Any]) -> str:
        if self.message_index is not None:
            self.held.append(item)
            return ""
        self.reasoning_sent += 1
        return self._reasoning_events(item)

    def _reasoning_events(self, part: Mapping[str, Any]) -> str:
        index = self.items
        self.items += 1
        item_id = output_item_id(self.reply_id, REASONING_PREFIX, index)
        done = reasoning_item(part, item_id, encrypted=self.request.include_encrypted_reasoning)
        out = self._event(
            "response.output_item.added",
            {"output_index": index, "item": {**done, "summary": []}},
        )
        for n, summary in enumerate(done["summary"]):
            text = summary.get("text", "")
            where = {"item_id": item_id, "output_index": index, "summary_index": n}
            out += self._event(
                "response.reasoning_summary_part.added",
                {**where, "part": {"type": "summary_text", "text": ""}},
            )
            out += self._event("response.reasoning_summary_text.delta", {**where, "delta": text})
            out += self._event("response.reasoning_summary_text.done", {**where, "text": text})
            out += self._event(
                "response.reasoning_summary_part.done",
                {**where, "part": {"type": "summary_text", "text": text}},
            )
        return out + self._event("response.output_item.done", {"output_index": index, "item": done})

    def _close_message(self, text: str) -> str:
        assert self.message_index is not None
        item_id, index = self._message_id(), self.message_index
        where = {"item_id": item_id, "output_index": index, "content_index": 0}
        return (
            self._event("response.output_text.done", {**where, "text": text, "logprobs": []})
            + self._event("response.content_part.done", {**where, "part": output_text(text)})
            + self._event(
                "response.output_item.done",
                {"output_index": index, "item": message_item(text, item_id)},
            )
        )

    def _call_events(self, reply: Reply) -> str:
        assert reply.call is not None
        index = self.items
        self.items += 1
        custom = is_custom_call(reply.call, self.request)
        added = call_item(reply.call, self.reply_id, index, custom=custom, done=False)
        done = call_item(reply.call, self.reply_id, index, custom=custom)
        where = {"item_id": done["id"], "output_index": index}
        out = self._event("response.output_item.added", {"output_index": index, "item": added})
        if custom:
            text = call_input_text(reply.call.arguments)
            out += self._event("response.custom_tool_call_input.delta", {**where, "delta": text})
            out += self._event("response.custom_tool_call_input.done", {**where, "input": text})
        else:
            arguments = arguments_text(reply.call.arguments)
            out += self._event(
                "response.function_call_arguments.delta", {**where, "delta": arguments}
            )
            out += self._event(
                "response.function_call_arguments.done", {**where, "arguments": arguments}
            )
        return out + self._event("response.output_item.done", {"output_index": index, "item": done})

    def _compaction_events(self, token: str) -> str:
        index = self.items
        self.items += 1
        item = compaction_item(self.reply_id, token, index)
        assert item["id"].startswith(COMPACTION_PREFIX)
        return self._event(
            "response.output_item.added", {"output_index": index, "item": item}
        ) + self._event("response.output_item.done", {"output_index": index, "item": item})

    # ------------------------------------------------------------------ the end

    def _before_message(self, reply: Reply) -> int:
        """How many of the reply's reasoning items this stream puts before its message: the
        ones it sent before the text began; when the text has not begun, as many as the reply
        says (its `message_at`, which the log gives: reasoning precedes its answer's text)."""
        if self.message_index is not None:
            return self.reasoning_sent
        split = len(reply.reasoning) if reply.message_at is None else reply.message_at
        return max(self.reasoning_sent, split)

    def final(self, reply: Reply) -> Reply:
        """`reply` with the message where this stream puts it. A reply read off the log already
        says so whenever each answer's reasoning reached the stream before its text (a
        Responses upstream's always does): then this is `reply` itself."""
        before = self._before_message(reply)
        if not reply.text or before >= len(reply.reasoning):
            return replace(reply, message_at=None)
        return replace(reply, message_at=before)

    def finish(self, reply: Reply) -> str:
        reply = self.final(reply)
        out = ""
        if reply.compaction is not None:
            out += self._compaction_events(reply.compaction)
        else:
            if reply.text and self.message_index is None:
                # Reasoning the stream was not shown that precedes the text, then the text.
                before = self._before_message(reply)
                for shown in reply.reasoning[self.reasoning_sent : before]:
                    out += self._reasoning_events(shown)
                self.reasoning_sent = before
                out += self.text(reply.text)
            elif reply.text.startswith(self.streamed) and len(reply.text) > len(self.streamed):
                out += self.text(reply.text[len(self.streamed) :])
            if self.message_index is not None:
                out += self._close_message(reply.text)
            # Reasoning held back behind the text, then any the stream was not shown.
            seen = self.reasoning_sent + len(self.held)
            for part in [*self.held, *reply.reasoning[seen:]]:
                out += self._reasoning_events(part)
            self.held = []
            if reply.call is not None:
                out += self._call_events(reply)
        response = render_reply(reply, self.request)
        kind = "response.incomplete" if response["status"] == "incomplete" else "response.completed"
        return out + self._event(kind, {"response": response})

    def error(self, status: int, code: str, message: str, details: Mapping[str, Any]) -> str:
        failed = response_object(
            reply_id=self.reply_id,
            created=self.created,
            model=self.model,
            request=self.request,
            status="failed",
            output=[],
            usage=None,
            error=error_object(code, message, details),
        )
        return self._event("response.failed", {"response": failed})

    @staticmethod
    def keepalive() -> str:
        return ": keepalive\n\n"

    def whole(self, reply: Reply) -> str:
        """A stored reply as one stream (a replayed request that asks for a stream): the same
        events, in the order its `output` has."""
        split = len(reply.reasoning) if reply.message_at is None else reply.message_at
        out = self.start(reply.usage)
        for part in reply.reasoning[:split]:
            out += self.reasoning(part)
        out += self.text(reply.text)
        for part in reply.reasoning[split:]:
            out += self.reasoning(part)
        return out + self.finish(reply)
