"""The gateway driven by the official `openai` and `anthropic` SDKs against uvicorn (contract §14).

Both client formats on both upstream providers, streamed and not: the upstream is a fake
OpenAI or Anthropic endpoint in this process (tests/gateway/live.py) that answers what each
test queues and records what the gateway sent it.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from typing import Any

import pytest

from sessions_app.models import GatewayExchange, Message, ProjectionSnapshot, Run, Session
from tests.gateway.clients import LOOKUP, Chat, error_code, post
from tests.gateway.live import Live, make_app, make_version, upstream

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

FORMATS = ("openai", "anthropic")
PROTOCOL_NOTE = ("context_task_memory_set", {"purpose": "remember", "memory": "likes tea"})


@dataclass
class World:
    live: Live
    key: str
    application: Any
    model: Any  # the fake upstream
    version: Any

    @property
    def base(self) -> str:
        return self.live.base

    def chat(self, fmt: str, *, stream: bool = False, key: str | None = None, **kw: Any) -> Chat:
        return Chat(fmt, self.base, key or self.key, stream=stream, **kw)


@pytest.fixture(params=FORMATS)
def upstream_wire(request) -> str:
    return request.param


@pytest.fixture
def world(live, upstream_wire, transactional_db):
    application, key = make_app()
    with upstream(upstream_wire) as model:
        version = make_version(application, provider=upstream_wire, upstream_url=model.url)
        yield World(live, key, application, model, version)


def _sent_messages(request: dict[str, Any]) -> str:
    return json.dumps(request)


# --------------------------------------------------------------------------- turns


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_text_after_a_protocol_call_comes_back_in_one_request(world, fmt, stream):
    world.model.answer_with("Let me note that.", [("call_a", *PROTOCOL_NOTE)])
    world.model.say("Noted.")
    chat = world.chat(fmt, stream=stream)
    result = chat.send([chat.user("I like tea")], model="helper@1")
    assert result.text == "Let me note that.\n\nNoted."
    assert result.finish == "stop"
    assert result.model == f"{world.version.model_provider}-model"
    assert len(world.model.requests) == 2
    # The protocol call and its result reached the model's second request, not the client.
    second = _sent_messages(world.model.requests[1])
    assert "call_a" in second and "likes tea" in second
    assert result.usage["input"] == 200 and result.usage["output"] == 20
    session = Session.objects.get(pk=result.session)
    assert Message.objects.filter(session=session, kind="tool_result").count() == 1
    if not stream:
        assert result.headers["x-contextproto-turns"] == "2"


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_a_client_tool_round_trip(world, fmt, stream):
    world.model.call("lookup", {"city": "Oslo"}, call_id="call_0")
    world.model.say("Sunny in Oslo.")
    chat = world.chat(fmt, stream=stream)
    messages = [chat.user("Weather in Oslo?")]
    first = chat.send(messages, tools=[LOOKUP])
    assert first.finish == "tool_calls"
    call_id, name, arguments = first.call
    assert (name, arguments) == ("lookup", {"city": "Oslo"})
    messages += [first.message, chat.tool_result(call_id, "sunny, 21 degrees")]
    second = world.chat(fmt, stream=stream, key=first.headers["x-contextproto-session-key"]).send(
        messages, tools=[LOOKUP]
    )
    assert second.text == "Sunny in Oslo."
    assert "sunny, 21 degrees" in _sent_messages(world.model.requests[1])
    session = Session.objects.get(pk=first.session)
    assert Run.objects.filter(session=session).count() == 1


@pytest.mark.parametrize("fmt", FORMATS)
def test_full_trimmed_and_incremental_clients_share_one_log(world, fmt):
    for text in ("one", "two", "three", "four"):
        world.model.say(text)
    chat = world.chat(fmt)
    first = chat.send([chat.user("a")])
    key = first.headers["x-contextproto-session-key"]
    chat = world.chat(fmt, key=key)
    full = chat.send([chat.user("a"), first.message, chat.user("b")])
    trimmed = chat.send([full.message, chat.user("c")])
    incremental = chat.send([chat.user("d")])
    assert [full.text, trimmed.text, incremental.text] == ["two", "three", "four"]
    log = Message.objects.filter(session_id=first.session).order_by("index")
    assert [(m.kind, m.content) for m in log] == [
        ("input", "a"),
        ("text", "one"),
        ("input", "b"),
        ("text", "two"),
        ("input", "c"),
        ("text", "three"),
        ("input", "d"),
        ("text", "four"),
    ]


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_a_retried_request_gets_the_stored_reply_without_a_model_call(world, fmt, stream):
    world.model.say("Only once.")
    chat = world.chat(fmt, stream=stream)
    messages = [chat.user("Say it once")]
    first = chat.send(messages)
    key = first.headers["x-contextproto-session-key"]
    again = world.chat(fmt, stream=stream, key=key).send(messages)
    assert again.text == first.text == "Only once."
    assert again.headers["x-contextproto-replayed"] == "true"
    assert len(world.model.requests) == 1


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_replayed_reply_is_the_same_body_byte_for_byte(world, fmt):
    world.model.say("Once, exactly.")
    path = (
        "/gateway/openai/v1/chat/completions"
        if fmt == "openai"
        else "/gateway/anthropic/v1/messages"
    )
    body: dict[str, Any] = {"model": "helper", "messages": [{"role": "user", "content": "hi"}]}
    if fmt == "anthropic":
        body["max_tokens"] = 64
    status, headers, content = post(world.base + path, body, {"x-api-key": world.key})
    assert status == 200, content
    key = headers["x-contextproto-session-key"]
    status, again_headers, again = post(world.base + path, body, {"Authorization": f"Bearer {key}"})
    assert status == 200
    assert again == content
    assert again_headers["x-contextproto-replayed"] == "true"
    assert again_headers["x-contextproto-turns"] == "0"


@pytest.mark.parametrize("fmt", FORMATS)
def test_mismatch_and_nothing_new_are_refused_with_reasons(world, fmt):
    world.model.say("one")
    chat = world.chat(fmt)
    first = chat.send([chat.user("a")])
    chat = world.chat(fmt, key=first.headers["x-contextproto-session-key"])
    refused = chat.error([chat.user("a"), chat.assistant("not what you said"), chat.user("b")])
    assert refused.status_code == 409
    assert error_code(refused) == "gateway_transcript_mismatch"
    assert refused.response.headers["x-should-retry"] == "false"
    nothing = chat.error([chat.user("a"), first.message])
    assert nothing.status_code == 400
    assert error_code(nothing) == "gateway_nothing_new"
    assert len(world.model.requests) == 1


@pytest.mark.parametrize("fmt", FORMATS)
def test_system_text_takes_its_place_or_is_refused(world, fmt):
    world.model.say("ok")
    chat = world.chat(fmt)
    chat.send([chat.user("hi")], system="Always answer in French.")
    system = _sent_messages(world.model.requests[0])
    assert "Always answer in French." in system
    strict = make_version(
        world.application,
        name="strict",
        provider=world.version.model_provider,
        upstream_url=world.model.url,
        prompt="You are strict.\n{{context_protocol}}",
    )
    refused = chat.error([chat.user("hi")], model="strict", system="Be nice.")
    assert refused.status_code == 400
    assert error_code(refused) == "gateway_system_not_accepted"
    world.model.say("fine")
    assert chat.send([chat.user("hi")], model=str(strict.id)).text == "fine"


@pytest.mark.parametrize("fmt", FORMATS)
def test_client_tools_follow_the_protocol_tools_and_reserved_names_are_refused(world, fmt):
    world.model.say("ok")
    chat = world.chat(fmt)
    chat.send([chat.user("hi")], tools=[LOOKUP])
    request = world.model.requests[0]
    names = [t.get("name") or t["function"]["name"] for t in request["tools"]]
    assert names[-1] == "lookup" and "context_fold_create" in names
    reserved = ("context_fold_read", "mine", {"type": "object"})
    refused = chat.error([chat.user("hi")], tools=[reserved])
    assert (refused.status_code, error_code(refused)) == (400, "tool_name_reserved")


def test_forwarded_refused_and_ignored_parameters(world):
    world.model.say("ok")
    chat = world.chat("openai")
    raw = chat.client.chat.completions.with_raw_response.create(
        model="helper",
        messages=[chat.user("hi")],
        tools=chat._tools([LOOKUP]),
        temperature=0.2,
        top_p=0.9,
        max_completion_tokens=77,
        stop=["END"],
        seed=7,
        tool_choice={"type": "function", "function": {"name": "lookup"}},
        user="someone",
        metadata={"a": "b"},
    )
    assert raw.headers["x-contextproto-ignored"] == "metadata,user"
    sent = world.model.requests[0]
    if world.model.wire == "openai":
        assert (sent["temperature"], sent["top_p"], sent["seed"]) == (0.2, 0.9, 7)
        assert sent["max_completion_tokens"] == 77 and sent["stop"] == ["END"]
        assert sent["tool_choice"] == {"type": "function", "function": {"name": "lookup"}}
    else:
        # API version 2026-10-21 refuses sampling parameters on every model; no seed either.
        assert sent["max_tokens"] == 77 and sent["stop_sequences"] == ["END"]
        assert not {"temperature", "top_p", "seed"} & set(sent)
        assert sent["tool_choice"]["type"] == "tool" and sent["tool_choice"]["name"] == "lookup"
    for refused_params in ({"n": 2}, {"tool_choice": "required"}):
        refused = chat.error([chat.user("hi")], tools=[LOOKUP], **refused_params)
        assert (refused.status_code, error_code(refused)) == (400, "gateway_parameter_unsupported")
    anthropic_chat = world.chat("anthropic")
    refused = anthropic_chat.error(
        [anthropic_chat.user("hi")], tools=[LOOKUP], tool_choice={"type": "any"}
    )
    assert (refused.status_code, error_code(refused)) == (400, "gateway_parameter_unsupported")


# --------------------------------------------------------------------------- keys


@pytest.mark.parametrize("fmt", FORMATS)
def test_keys_name_the_session(world, fmt):
    world.model.say("one")
    world.model.say("two")
    chat = world.chat(fmt)
    first = chat.send([chat.user("a")])
    session = first.session
    # The application key names one of its sessions with the header.
    second = chat.send(
        [chat.user("a"), first.message, chat.user("b")],
        headers={"X-Contextproto-Session": session},
    )
    assert second.text == "two" and second.session == session
    assert "x-contextproto-session-key" not in second.headers
    # Another Application's key cannot reach it.
    _other, other_key = make_app("other")
    stranger = world.chat(fmt, key=other_key)
    hidden = stranger.error([chat.user("c")], headers={"X-Contextproto-Session": session})
    assert hidden.status_code == 404
    bad = world.chat(fmt, key="cpa_not_a_key").error([chat.user("c")])
    assert bad.status_code == 401 and bad.response.headers["x-should-retry"] == "false"
    unknown = chat.error([chat.user("c")], model="nobody@9")
    assert (unknown.status_code, error_code(unknown)) == (404, "gateway_model_not_found")


def test_models_lists_runnable_published_versions(world):
    make_version(world.application, name="hosted", provider="external")
    openai_ids = [m.id for m in world.chat("openai").client.models.list()]
    anthropic_ids = [m.id for m in world.chat("anthropic").client.models.list()]
    assert openai_ids == anthropic_ids == ["helper@1"]


# --------------------------------------------------------------------------- the upstream


@pytest.mark.parametrize("fmt", FORMATS)
def test_parallel_calls_are_cut_to_one_and_reused_ids_replaced(world, fmt):
    world.model.answer_with(
        None, [("call_0", "lookup", {"city": "Oslo"}), ("call_1", "lookup", {"city": "Rome"})]
    )
    world.model.answer_with(None, [("call_0", "lookup", {"city": "Rome"})])
    world.model.say("Done.")
    chat = world.chat(fmt)
    messages = [chat.user("Weather in Oslo and Rome?")]
    first = chat.send(messages, tools=[LOOKUP])
    # Every call handed to the client has an id the gateway minted, unique across the service
    # (SPEC §19.1 step 4), never the model's own.
    assert first.call[0].startswith("call_") and first.call[0] != "call_0"
    assert first.call[2] == {"city": "Oslo"}
    assert len(first.message.get("tool_calls") or first.message["content"]) == 1
    chat = world.chat(fmt, key=first.headers["x-contextproto-session-key"])
    messages += [first.message, chat.tool_result(first.call[0], "rainy")]
    second = chat.send(messages, tools=[LOOKUP])
    # The model reused call_0: the client still gets a fresh id.
    assert second.call[0] not in ("call_0", first.call[0]) and second.call[2] == {"city": "Rome"}
    assert "single_tool_call_per_turn" in _sent_messages(world.model.requests[1])
    messages += [second.message, chat.tool_result(second.call[0], "sunny")]
    assert chat.send(messages, tools=[LOOKUP]).text == "Done."


@pytest.mark.parametrize("fmt", FORMATS)
def test_max_turns_per_run_ends_the_request_with_422(world, fmt):
    world.version.max_turns_per_run = 2
    world.version.save(update_fields=["max_turns_per_run"])
    for n in range(3):
        world.model.answer_with(None, [(f"call_p{n}", *PROTOCOL_NOTE)])
    chat = world.chat(fmt)
    refused = chat.error([chat.user("loop")])
    assert (refused.status_code, error_code(refused)) == (422, "max_turns_reached")
    assert len(world.model.requests) == 2


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize(
    ("status", "answered", "code"),
    [
        (401, 401, "gateway_upstream_unauthorized"),
        (429, 429, "gateway_upstream_rate_limited"),
        (500, 502, "gateway_upstream_failed"),
    ],
)
def test_upstream_failures_map_to_statuses_and_never_show_the_key(
    world, fmt, status, answered, code, tmp_path_factory
):
    secret = "sk-upstream-SECRET-0123456789"
    world.model.fail(status, f"Incorrect API key provided: {secret}")
    chat = world.chat(fmt)
    refused = chat.error([chat.user("hi")], headers={"X-Contextproto-Upstream-Key": secret})
    assert (refused.status_code, error_code(refused)) == (answered, code)
    text = refused.response.text
    assert secret not in text
    assert f"{world.version.model_provider} {world.version.model_name}" in text
    assert secret not in world.live.log.read_text()
    sent = world.model.received[0].headers
    assert secret in (sent.get("authorization", "") + sent.get("x-api-key", ""))
    if answered == 401:
        assert refused.response.headers["x-should-retry"] == "false"
    else:
        assert refused.response.headers["retry-after"]
    session = Session.objects.get(pk=refused.response.headers["x-contextproto-session"])
    assert not Message.objects.filter(session=session, role="assistant").exists()
    stored = json.dumps(
        [
            list(Run.objects.filter(session=session).values()),
            [s.view.body for s in ProjectionSnapshot.objects.filter(session=session)],
            list(GatewayExchange.objects.filter(session=session).values()),
        ],
        default=str,
    )
    assert secret not in stored


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_slow_upstream_times_out_with_504(world, fmt):
    world.model.answer(200, {}, delay=5)
    chat = world.chat(fmt)
    refused = chat.error([chat.user("hi")])
    assert (refused.status_code, error_code(refused)) == (504, "gateway_upstream_timeout")
    assert refused.response.headers["retry-after"]


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_second_request_on_a_busy_session_gets_session_busy(world, fmt):
    world.model.say("first")
    world.model.say("second, slowly", delay=2)
    chat = world.chat(fmt)
    first = chat.send([chat.user("a")])
    key = first.headers["x-contextproto-session-key"]
    results: dict[str, Any] = {}

    def slow() -> None:
        results["slow"] = world.chat(fmt, key=key).send([chat.user("b")])

    thread = threading.Thread(target=slow)
    thread.start()
    time.sleep(0.8)
    busy = world.chat(fmt, key=key).error([chat.user("c")])
    thread.join()
    assert (busy.status_code, error_code(busy)) == (409, "session_busy")
    assert busy.response.headers["retry-after"]
    assert "x-should-retry" not in busy.response.headers
    assert results["slow"].text == "second, slowly"
