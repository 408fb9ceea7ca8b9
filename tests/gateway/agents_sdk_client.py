"""An OpenAI Agents SDK program against the gateway, as its users write one.

Run by tests/gateway/test_agents_sdk.py with the interpreter of the SDK's own virtualenv
(tests/gateway/installs.py), never imported by the suite: `agents` here is the SDK.

`Runner.run_sync` asks about the weather: the model calls `weather` (a `function_tool`
whose schema the SDK generates from a pydantic model: `$defs`, `anyOf` for the optional
field), the SDK runs it and sends the result back, the model answers. Then a streamed run
(`Runner.run_streamed`) continues the conversation from `result.to_input_list()`, the SDK's
own way to hold a conversation. Prints one JSON object: the final outputs, the streamed
text deltas and the tool's calls.

Environment: GATEWAY_URL (the gateway's OpenAI base URL, …/gateway/openai/v1), GATEWAY_KEY
(a session key), GATEWAY_MODEL.
"""

import asyncio
import json
import os
from typing import Any, Literal

from openai import AsyncOpenAI
from openai.types.responses import ResponseTextDeltaEvent
from pydantic import BaseModel

# The SDK's `agents` (ruff files it with this project's app of the same name).
from agents import Agent, OpenAIChatCompletionsModel, Runner, function_tool, set_tracing_disabled

CALLS: list[dict[str, Any]] = []


class Place(BaseModel):
    city: str
    country: str | None = None


@function_tool
def weather(place: Place, unit: Literal["celsius", "fahrenheit"] = "celsius") -> str:
    """The weather at a place right now."""
    CALLS.append({"place": place.model_dump(), "unit": unit})
    return f"sunny, 21 degrees {unit} in {place.city}"


def agent() -> Agent:
    # A client per event loop: run_sync and asyncio.run each run their own.
    client = AsyncOpenAI(base_url=os.environ["GATEWAY_URL"], api_key=os.environ["GATEWAY_KEY"])
    model = OpenAIChatCompletionsModel(model=os.environ["GATEWAY_MODEL"], openai_client=client)
    return Agent(
        name="forecaster",
        instructions="Answer weather questions in one sentence.",
        model=model,
        tools=[weather],
    )


async def streamed(history: list[Any]) -> dict[str, Any]:
    result = Runner.run_streamed(agent(), history)
    deltas = []
    async for event in result.stream_events():
        if event.type == "raw_response_event" and isinstance(event.data, ResponseTextDeltaEvent):
            deltas.append(event.data.delta)
    return {"final": result.final_output, "deltas": deltas}


def main() -> None:
    set_tracing_disabled(True)  # the gateway's session is the record; no trace upload
    first = Runner.run_sync(agent(), "What is the weather in Oslo?")
    history = [*first.to_input_list(), {"role": "user", "content": "And in Bergen?"}]
    second = asyncio.run(streamed(history))
    print(json.dumps({"final": first.final_output, "streamed": second, "calls": CALLS}))


if __name__ == "__main__":
    main()
