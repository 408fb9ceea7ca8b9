"""Pydantic AI as its users write an agent: one tool, two turns, on an OpenAI or Anthropic model.

Run with the interpreter of its own virtualenv (tests/gateway/installs.py). argv[1]: "openai"
(`OpenAIChatModel`, Chat Completions) or "anthropic" (`AnthropicModel`). The first turn
(`run_sync`) calls the tool and answers; the second continues from `all_messages()`, the
framework's own way to hold a conversation, and is streamed (`run_stream`).

Environment: CLIENT_BASE_URL (the OpenAI base URL …/v1, or the Anthropic base URL without
`/v1`), CLIENT_API_KEY, CLIENT_MODEL. Prints one JSON line: both answers and the tool's calls.
"""

import asyncio
import json
import os
import sys

from pydantic_ai import Agent
from pydantic_ai.models.anthropic import AnthropicModel
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.anthropic import AnthropicProvider
from pydantic_ai.providers.openai import OpenAIProvider

CALLS: list[str] = []


def model():
    base, key, name = (os.environ[k] for k in ("CLIENT_BASE_URL", "CLIENT_API_KEY", "CLIENT_MODEL"))
    if sys.argv[1] == "anthropic":
        return AnthropicModel(name, provider=AnthropicProvider(base_url=base, api_key=key))
    return OpenAIChatModel(name, provider=OpenAIProvider(base_url=base, api_key=key))


agent = Agent(model(), instructions="Answer weather questions in one sentence.", retries=0)


@agent.tool_plain
def weather(city: str) -> str:
    """The weather in a city right now."""
    CALLS.append(city)
    return f"sunny, 21 degrees in {city}"


async def streamed(history):
    async with agent.run_stream("And in Bergen?", message_history=history) as result:
        return await result.get_output()


def main() -> None:
    first = agent.run_sync("What is the weather in Oslo?")
    second = asyncio.run(streamed(first.all_messages()))
    print(json.dumps({"first": first.output, "second": second, "calls": CALLS}))


if __name__ == "__main__":
    main()
