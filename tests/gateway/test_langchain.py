"""LangChain's ChatOpenAI, unchanged, against the gateway (contract §14).

`ChatOpenAI(base_url=…/gateway/openai/v1, api_key=<session key>)` with `bind_tools`: an
`invoke` the model answers with a call of the client's tool (after a protocol call the
gateway runs itself), the tool run by LangChain and its `ToolMessage` sent back in the next
`invoke` with the whole conversation, then `stream` continuing it. The upstream is a fake
OpenAI endpoint (tests/gateway/live.py).
"""

from __future__ import annotations

import json

import pytest
from langchain_core.messages import AIMessage, AIMessageChunk, HumanMessage, SystemMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI

from sessions_app.models import GatewayExchange, Message, Session
from tests.gateway.live import make_app, make_version, start_session, upstream

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

MEMORY = ("context_task_memory_set", {"purpose": "keep the task", "memory": "a price quote"})
CALLS: list[dict] = []


@tool
def price_lookup(product: str, quantity: int | None = None) -> str:
    """Look up the unit price of a product, optionally for a quantity."""
    CALLS.append({"product": product, "quantity": quantity})
    return f"{product}: 12.40 EUR per unit"


def test_chat_openai_with_bound_tools_invokes_through_a_tool_call_and_streams(
    live, transactional_db
):
    CALLS.clear()
    application, key = make_app("langchain")
    with upstream("openai") as model:
        version = make_version(application, provider="openai", upstream_url=model.url)
        session = start_session(live.base, key, str(version.id))
        llm = ChatOpenAI(
            base_url=f"{live.base}/gateway/openai/v1",
            api_key=session["sessionKey"],
            model="helper@1",
        )
        bound = llm.bind_tools([price_lookup])

        model.answer_with("Noting the request.", [("call_0", *MEMORY)])
        model.call("price_lookup", {"product": "A-100", "quantity": 5000}, call_id="call_0")
        model.say("5000 units of A-100 cost 62,000 EUR.")
        model.say("Yes: 12.40 EUR each.")

        messages = [
            SystemMessage("You answer price questions."),
            HumanMessage("What do 5000 units of A-100 cost?"),
        ]
        asked = bound.invoke(messages)
        assert isinstance(asked, AIMessage)
        assert asked.content == "Noting the request."
        [call] = asked.tool_calls
        assert (call["name"], call["args"]) == (
            "price_lookup",
            {"product": "A-100", "quantity": 5000},
        )
        # The model reused call_0 (the protocol call's id): LangChain got a fresh one.
        assert call["id"] != "call_0"
        result = price_lookup.invoke(call)  # a ToolMessage answering the call's id
        messages += [asked, result]
        answered = bound.invoke(messages)
        assert answered.content == "5000 units of A-100 cost 62,000 EUR."
        assert not answered.tool_calls

        messages += [answered, HumanMessage("Is that the unit price times 5000?")]
        chunks = list(bound.stream(messages))
        streamed = sum(chunks[1:], chunks[0])
        assert isinstance(streamed, AIMessageChunk)
        assert streamed.content == "Yes: 12.40 EUR each."
        assert len([c for c in chunks if c.content]) >= 1

    assert CALLS == [{"product": "A-100", "quantity": 5000}]
    # The tool's schema (anyOf for the optional quantity) reached the model; so did its result.
    sent_tools = {t["function"]["name"]: t for t in model.requests[0]["tools"]}
    assert "anyOf" in json.dumps(sent_tools["price_lookup"]["function"]["parameters"])
    assert "12.40 EUR per unit" in json.dumps(model.requests[2])
    assert "You answer price questions." in json.dumps(model.requests[0])
    log = list(
        Message.objects.filter(session_id=session["id"])
        .order_by("index")
        .values_list("kind", "tool_name")
    )
    assert log == [
        ("input", None),
        ("tool_call", "context_task_memory_set"),
        ("tool_result", "context_task_memory_set"),
        ("tool_call", "price_lookup"),
        ("tool_result", "price_lookup"),
        ("text", None),
        ("input", None),
        ("text", None),
    ]
    assert Session.objects.filter(application=application).count() == 1
    exchanges = GatewayExchange.objects.filter(application=application).order_by("created_at")
    assert [(e.http_status, e.streamed, e.replayed) for e in exchanges] == [
        (200, False, False),
        (200, False, False),
        (200, True, False),
    ]
