"""The demo's gateway conversation (`manage.py demo`, contract §14): the official openai client,
in process, and the snippet that continues it against the running server."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx2
from django.core.wsgi import get_wsgi_application
from openai import OpenAI

from agents.models import AgentVersion
from agents.selectors import gateway_model_name
from labs import scenario
from sessions_app.models import Message
from sessions_app.services.sessions import session_create

# Where the in-process client's requests say they go (a host ALLOWED_HOSTS always has).
IN_PROCESS_BASE = "http://127.0.0.1"
PASTE_QUESTION = "Does the quote still stand?"

Write = Callable[[str], Any]


def converse(version: AgentVersion, write: Write) -> dict[str, Any]:
    """One conversation through the gateway with the official openai client, in process.

    The client declares its own tool and sends the whole conversation each time, as a plain
    Chat Completions loop does; the session (its key is the client's API key) keeps the log,
    the scripted model notes the task with a protocol tool the gateway runs itself, calls the
    client's tool, and answers from its result. Returns the session, its key and the model
    name the client sent.
    """
    session, key = session_create(agent_version=version)
    model = gateway_model_name(version)
    client = OpenAI(
        base_url=f"{IN_PROCESS_BASE}/gateway/openai/v1",
        api_key=key,
        http_client=httpx2.Client(transport=httpx2.WSGITransport(app=get_wsgi_application())),
        max_retries=0,
    )
    tools: Any = [scenario.GATEWAY_TOOL]
    messages: list[Any] = [
        {"role": "system", "content": scenario.GATEWAY_SYSTEM},
        {"role": "user", "content": scenario.GATEWAY_QUESTION},
    ]
    write(f"\n== through the gateway: the official openai client, {model}: session {session.id}")
    write(f"  client  -> {scenario.GATEWAY_QUESTION} (its own tool: price_lookup)")
    raw = client.chat.completions.with_raw_response.create(
        model=model, messages=messages, tools=tools
    )
    asked = raw.parse().choices[0].message
    [call] = asked.tool_calls or []
    function = getattr(call, "function")  # noqa: B009 (a function tool call)
    ran = sorted(
        {
            str(name)
            for name in Message.objects.filter(
                session=session, kind="tool_call", tool_name__startswith="context_"
            ).values_list("tool_name", flat=True)
        }
    )
    write(
        f'  gateway -> "{asked.content}" + {function.name} {function.arguments} '
        f"({raw.headers['X-Contextproto-Turns']} model turns; the gateway ran "
        f"{', '.join(ran)} itself)"
    )
    write(f"  client ran {function.name}: {scenario.GATEWAY_PRICE}")
    messages += [
        {
            "role": "assistant",
            "content": asked.content,
            "tool_calls": [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": function.name, "arguments": function.arguments},
                }
            ],
        },
        {"role": "tool", "tool_call_id": call.id, "content": scenario.GATEWAY_PRICE},
    ]
    raw = client.chat.completions.with_raw_response.create(
        model=model, messages=messages, tools=tools
    )
    answer = raw.parse().choices[0].message.content
    write(f'  gateway -> "{answer}" ({raw.headers["X-Contextproto-Turns"]} model turn)')
    return {"session": session, "key": key, "model": model}


def snippet(base_url: str, gateway: dict[str, Any], write: Write) -> None:
    """Where the gateway is served, and a snippet that continues the conversation there."""
    openai_base = f"{base_url}/gateway/openai/v1"
    write(
        f"\nDrop-in gateway, served with the admin: OpenAI Chat Completions at {openai_base}"
        f", Anthropic Messages at {base_url}/gateway/anthropic."
    )
    write(
        "Paste into python while the server runs: it continues the gateway conversation "
        "with its session key, sending its system message and only the new user message (the "
        "same message sent again "
        'is a retry and gets the same reply; an application key and model="name@N" start '
        'a new session; README, "Drop-in: change the base URL"):\n'
    )
    write(
        "from openai import OpenAI\n\n"
        f'client = OpenAI(base_url="{openai_base}", api_key="{gateway["key"]}")\n'
        "reply = client.chat.completions.create(\n"
        f'    model="{gateway["model"]}",\n'
        "    messages=[\n"
        f'        {{"role": "system", "content": "{scenario.GATEWAY_SYSTEM}"}},\n'
        f'        {{"role": "user", "content": "{PASTE_QUESTION}"}},\n'
        "    ],\n"
        ")\n"
        "print(reply.choices[0].message.content)"
    )
