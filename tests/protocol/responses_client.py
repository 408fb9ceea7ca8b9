"""The official `openai` SDK against canned gateway answers, with no server: an httpx
MockTransport hands the SDK the bodies and event streams the Responses wire renders, so the
SDK's own parsers and stream helper judge every shape (contract §21)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx
import openai
from openai import omit
from openai._models import construct_type
from openai.lib._parsing._responses import parse_response
from openai.lib.streaming.responses import ResponseStreamState
from openai.types.responses import Response, ResponseStreamEvent

Answer = Callable[[httpx.Request], httpx.Response]


def client(answer: Answer) -> openai.OpenAI:
    """An SDK client whose every request is answered by `answer` (nothing leaves the process)."""
    return openai.OpenAI(
        api_key="k",
        base_url="http://gateway.test/gateway/openai/v1",
        max_retries=0,
        http_client=httpx.Client(transport=httpx.MockTransport(answer)),
    )


def json_answer(body: Any, status: int = 200) -> Answer:
    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(status, json=body)

    return answer


def sse_answer(text: str) -> Answer:
    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            200, headers={"content-type": "text/event-stream"}, content=text.encode()
        )

    return answer


def events(text: str) -> list[tuple[str, dict[str, Any]]]:
    """(event name, data) of each Server-Sent Event of `text`."""
    out = []
    for block in text.split("\n\n"):
        if not block.strip() or block.startswith(":"):
            continue
        fields = dict(line.split(": ", 1) for line in block.split("\n"))
        out.append((fields["event"], json.loads(fields["data"])))
    return out


def accumulate(text: str) -> tuple[ResponseStreamState[Any], list[Any]]:
    """Feed `text` to the SDK's stream state machine as its stream would (events built the
    way its SSE decoder builds them); returns the state and the events it fired."""
    state: ResponseStreamState[Any] = ResponseStreamState(input_tools=omit, text_format=omit)
    fired = []
    for _name, data in events(text):
        event = construct_type(type_=ResponseStreamEvent, value=data)
        fired.extend(state.handle_event(event))
    return state, fired


def parsed(body: dict[str, Any]) -> dict[str, Any]:
    """A non-streamed response body as the stream helper's final response would hold it."""
    response = Response.model_validate(body)
    return parse_response(text_format=omit, input_tools=omit, response=response).to_dict()
