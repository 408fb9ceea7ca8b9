"""Exactly once under real concurrency (contract §14, issue 38): storms of identical requests.

uvicorn with two worker processes on PostgreSQL; a fake upstream that takes its time. Each
storm sends the conversation's next request five times at the same moment, through both
worker processes, with the session key and with the application key + X-Contextproto-Session,
through the official `openai` SDK (no retries) and plain HTTP. Every storm must run exactly one
turn (one upstream call), answer all five with the same 200 body, byte for byte, and leave
the session ready for the next storm. Fifty storms: a race that wins one time in ten fails
this test with certainty; half of the storms bring a new user message, half the result of a
client tool the model called.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import openai
import pytest

from sessions_app.models import GatewayConversation, Message, Run, Session
from tests.gateway.clients import post
from tests.gateway.live import gateway_server, make_app, make_version, upstream

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

PAIRS = 25  # storms = 2 x PAIRS
SIZE = 5
MODEL_SECONDS = 0.3
WEATHER = {
    "type": "function",
    "function": {
        "name": "weather",
        "description": "The weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}


@pytest.fixture(scope="module")
def two_workers(django_db_setup, django_db_blocker, tmp_path_factory) -> Iterator[str]:
    with gateway_server(tmp_path_factory.mktemp("storms"), workers=2) as base:
        yield base


def _send(way: int, base: str, keys: dict[str, str], body: dict[str, Any]) -> tuple[int, bytes]:
    """One request of a storm: the SDK or plain HTTP, the session key or the application key
    naming the session, by `way`."""
    with_session_key = way % 2 == 0
    key = keys["session"] if with_session_key else keys["app"]
    headers = {} if with_session_key else {"X-Contextproto-Session": keys["id"]}
    if way < 2:
        client = openai.OpenAI(base_url=f"{base}/gateway/openai/v1", api_key=key, max_retries=0)
        try:
            raw = client.chat.completions.with_raw_response.create(**body, extra_headers=headers)
        except openai.APIStatusError as exc:
            return exc.status_code, exc.response.content
        return raw.status_code, raw.http_response.content
    status, _headers, content = post(
        f"{base}/gateway/openai/v1/chat/completions",
        body,
        {"Authorization": f"Bearer {key}", **headers},
    )
    return status, content


def _storm(base: str, keys: dict[str, str], body: dict[str, Any]) -> list[tuple[int, bytes]]:
    barrier = threading.Barrier(SIZE)
    answers: list[tuple[int, bytes]] = [(0, b"")] * SIZE

    def one(way: int) -> None:
        barrier.wait()
        answers[way] = _send(way % 4, base, keys, body)

    threads = [threading.Thread(target=one, args=(n,)) for n in range(SIZE)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    return answers


@pytest.mark.django_db(transaction=True)
def test_each_storm_of_identical_requests_runs_one_turn_and_answers_all_alike(two_workers):
    application, app_key = make_app("storms")
    with upstream("openai") as model:
        make_version(application, provider="openai", upstream_url=model.url)
        model.say("Hello.")
        first = openai.OpenAI(
            base_url=f"{two_workers}/gateway/openai/v1", api_key=app_key, max_retries=0
        ).chat.completions.with_raw_response.create(
            model="helper", messages=[{"role": "user", "content": "hi"}], tools=[WEATHER]
        )
        keys = {
            "app": app_key,
            "id": first.headers["x-contextproto-session"],
            "session": first.headers["x-contextproto-session-key"],
        }
        messages: list[dict[str, Any]] = [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "Hello."},
        ]
        calls = 1
        for pair in range(PAIRS):
            for storm in ("user", "tool"):
                if storm == "user":
                    messages.append({"role": "user", "content": f"weather in city {pair}?"})
                    model.call("weather", {"city": f"c{pair}"}, delay=MODEL_SECONDS)
                else:
                    call = messages[-1]["tool_calls"][0]
                    messages.append(
                        {"role": "tool", "tool_call_id": call["id"], "content": f"sunny {pair}"}
                    )
                    model.say(f"It is sunny in city {pair}.", delay=MODEL_SECONDS)
                body = {"model": "helper", "messages": messages, "tools": [WEATHER]}
                answers = _storm(two_workers, keys, body)
                calls += 1
                where = f"storm {2 * pair + (storm == 'tool')} ({storm})"
                refused = [content for status, content in answers if status != 200]
                assert not refused, (where, refused)
                assert len({content for _, content in answers}) == 1, (where, answers)
                assert len(model.received) == calls, where  # exactly one upstream call
                reply = json.loads(answers[0][1])["choices"][0]["message"]
                sent_back: dict[str, Any] = {"role": "assistant", "content": reply["content"]}
                if reply.get("tool_calls"):
                    sent_back["tool_calls"] = reply["tool_calls"]
                messages.append(sent_back)

    kinds = list(
        Message.objects.filter(session_id=keys["id"])
        .order_by("index")
        .values_list("kind", flat=True)
    )
    assert kinds == ["input", "text"] + ["input", "tool_call", "tool_result", "text"] * PAIRS
    assert not Run.objects.filter(session_id=keys["id"], status=Run.Status.RUNNING).exists()


NEW_CONVERSATIONS = 40


@pytest.mark.django_db(transaction=True)
def test_first_requests_of_a_new_conversation_at_the_same_moment_start_one_session(two_workers):
    """SPEC §19.1: requests of a new conversation id that arrive at the same moment create one
    session, and the exactly-once rule holds among them (one upstream call, one body)."""
    application, app_key = make_app("conversations")
    with upstream("openai") as model:
        make_version(application, provider="openai", upstream_url=model.url)
        body = {
            "model": "helper",
            "messages": [{"role": "user", "content": "hi"}],
            "tools": [WEATHER],
        }
        for storm in range(NEW_CONVERSATIONS):
            model.say(f"Hello {storm}.", delay=MODEL_SECONDS)
            headers = {
                "Authorization": f"Bearer {app_key}",
                # Claude Code's header on half the storms, ours on the other half.
                ("x-claude-code-session-id" if storm % 2 else "X-Contextproto-Conversation"): (
                    f"conversation-{storm}"
                ),
            }
            barrier = threading.Barrier(SIZE)
            answers: list[tuple[int, dict[str, str], bytes]] = [(0, {}, b"")] * SIZE

            def one(n: int, headers: dict[str, str] = headers) -> None:
                barrier.wait()
                answers[n] = post(
                    f"{two_workers}/gateway/openai/v1/chat/completions", body, headers
                )

            threads = [threading.Thread(target=one, args=(n,)) for n in range(SIZE)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(60)
            where = f"storm {storm}"
            assert [status for status, _, _ in answers] == [200] * SIZE, (where, answers)
            assert len({content for _, _, content in answers}) == 1, (where, answers)
            sessions = {h.get("x-contextproto-session") for _, h, _ in answers}
            assert len(sessions) == 1, (where, sessions)
            assert len(model.received) == storm + 1, where  # exactly one upstream call
    assert Session.objects.filter(application=application).count() == NEW_CONVERSATIONS
    assert GatewayConversation.objects.filter(application=application).count() == (
        NEW_CONVERSATIONS
    )
