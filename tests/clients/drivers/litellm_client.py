"""LiteLLM as a client (`litellm.completion`), a tool round trip by hand, then a second turn.

Run with the interpreter of its own virtualenv (tests/gateway/installs.py), with
LITELLM_LOCAL_MODEL_COST_MAP=True (else importing it fetches its price list). The model is
`openai/<model>` at `api_base`: LiteLLM's OpenAI-compatible route (Chat Completions).

Environment: CLIENT_BASE_URL (…/v1), CLIENT_API_KEY, CLIENT_MODEL. Prints one JSON line: the
answers and the tool call LiteLLM returned.
"""

import json
import os

import litellm

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "weather",
            "description": "The weather in a city right now.",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
            },
        },
    }
]


def ask(messages, **options):
    return litellm.completion(
        model="openai/" + os.environ["CLIENT_MODEL"],
        api_base=os.environ["CLIENT_BASE_URL"],
        api_key=os.environ["CLIENT_API_KEY"],
        messages=messages,
        tools=TOOLS,
        num_retries=0,
        **options,
    )


def turn(messages, **options):
    """One user turn: the model's tool call, the tool's result sent back, the answer."""
    reply = ask(messages, **options).choices[0].message
    call = reply.tool_calls[0]
    city = json.loads(call.function.arguments)["city"]
    messages += [
        reply.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": call.id, "content": f"sunny, 21 degrees in {city}"},
    ]
    answer = ask(messages, **options).choices[0].message.content
    messages.append({"role": "assistant", "content": answer})
    return call.id, answer


def main() -> None:
    litellm.telemetry = False
    messages = [
        {"role": "system", "content": "Answer weather questions in one sentence."},
        {"role": "user", "content": "What is the weather in Oslo?"},
    ]
    first = turn(messages)
    messages.append({"role": "user", "content": "And in Bergen?"})
    second = turn(messages)
    print(json.dumps({"turns": [first, second]}))


if __name__ == "__main__":
    main()
