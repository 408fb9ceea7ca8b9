"""The OpenAI Agents SDK's default model (the Responses API), as its users write a program.

Run with the interpreter of the SDK's own virtualenv (tests/gateway/installs.py), never
imported by the suite: `agents` here is the SDK. A custom `AsyncOpenAI(base_url=…)` client
set as the default; `Agent(model=…)` with a `function_tool`; `Runner.run`, then
`Runner.run_streamed` continuing from `to_input_list()`; then two turns through the SDK's
`OpenAIResponsesCompactionSession` (over a `SQLiteSession`), told to compact after every turn.

Environment: CLIENT_BASE_URL (…/v1), CLIENT_API_KEY, CLIENT_MODEL (a `gpt-*` name: the
compaction session refuses others). Prints one JSON line: the final outputs, the streamed
text deltas, the tool's calls and the compacted session's items.
"""

import asyncio
import json
import os
from typing import Any

from openai import AsyncOpenAI
from openai.types.responses import ResponseTextDeltaEvent

# The SDK's `agents` (ruff files it with this project's app of the same name).
from agents import (
    Agent,
    OpenAIResponsesCompactionSession,
    Runner,
    SQLiteSession,
    function_tool,
    set_default_openai_client,
    set_tracing_disabled,
)

CALLS: list[str] = []


@function_tool
def weather(city: str) -> str:
    """The weather in a city right now."""
    CALLS.append(city)
    return f"sunny, 21 degrees in {city}"


async def main() -> dict[str, Any]:
    set_tracing_disabled(True)  # no trace upload
    client = AsyncOpenAI(
        base_url=os.environ["CLIENT_BASE_URL"], api_key=os.environ["CLIENT_API_KEY"], max_retries=0
    )
    set_default_openai_client(client, use_for_tracing=False)
    model = os.environ["CLIENT_MODEL"]
    agent = Agent(
        name="forecaster",
        instructions="Answer weather questions in one sentence.",
        model=model,
        tools=[weather],
    )
    first = await Runner.run(agent, "What is the weather in Oslo?")
    history = [*first.to_input_list(), {"role": "user", "content": "And in Bergen?"}]
    streamed = Runner.run_streamed(agent, history)
    deltas = []
    async for event in streamed.stream_events():
        if event.type == "raw_response_event" and isinstance(event.data, ResponseTextDeltaEvent):
            deltas.append(event.data.delta)

    session = OpenAIResponsesCompactionSession(
        "weather-chat",
        SQLiteSession("weather-chat"),
        client=client,
        model=model,
        should_trigger_compaction=lambda context: True,
    )
    third = await Runner.run(agent, "What about Tromso?", session=session)
    fourth = await Runner.run(agent, "Thanks, and Narvik?", session=session)
    return {
        "final": first.final_output,
        "streamed": {"final": streamed.final_output, "deltas": deltas},
        "session": [third.final_output, fourth.final_output],
        "session_items": [item.get("type", "message") for item in await session.get_items()],
        "calls": CALLS,
    }


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main())))
