"""A client that goes away (contract §14, issue 38), through uvicorn: mid-stream and while the
upstream is still working. The upstream call is closed at once, the session serves the next
request at once, and the log holds the whole turn or nothing of it. And a database that fails
after the stream began: the client API's error event, and a record.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import httpx
import pytest
from django.db import OperationalError

from contextproto.asgi import application as asgi_application
from sessions_app.models import GatewayExchange, Message, Run
from sessions_app.services import runtime
from tests.gateway.clients import Chat
from tests.gateway.live import Live, gateway_server, make_app, make_version, upstream
from tests.servers import run_coroutine, wait_for

PATH = "/gateway/openai/v1/chat/completions"
TEXT = " ".join(f"w{n}" for n in range(40))


@pytest.fixture(scope="module")
def gone_live(django_db_setup, django_db_blocker, tmp_path_factory) -> Iterator[Live]:
    tmp = tmp_path_factory.mktemp("disconnect")
    with gateway_server(tmp) as base:
        yield Live(base, tmp / "server.log")


def _kinds(session: str) -> list[str]:
    return list(
        Message.objects.filter(session_id=session).order_by("index").values_list("kind", flat=True)
    )


def _session_after_hello(chat: Chat, model) -> tuple[str, list[dict]]:
    model.say("Hello.")
    first = chat.send([chat.user("hi")])
    return first.session, [chat.user("hi"), first.message, chat.user("tell me a long story")]


@pytest.mark.postgres
@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_client_gone_mid_stream_closes_the_upstream_and_frees_the_session(gone_live):
    application, key = make_app("gone-stream")
    with upstream("openai") as model:
        make_version(application, provider="openai", upstream_url=model.url)
        chat = Chat("openai", gone_live.base, key)
        session, conversation = _session_after_hello(chat, model)
        model.say(TEXT, chunks=20, chunk_delay=0.1)
        body = {"model": "helper", "stream": True, "messages": conversation}
        headers = {"Authorization": f"Bearer {key}", "X-Contextproto-Session": session}
        with (
            httpx.Client(timeout=30) as http,
            http.stream("POST", gone_live.base + PATH, json=body, headers=headers) as response,
        ):
            for line in response.iter_lines():
                if '"content":"w0' in line:
                    break  # the story has begun: hang up
        gone = time.monotonic()
        # The gateway closes its upstream stream (the fake's next write fails), long before
        # the upstream would have finished its 2 s.
        wait_for(lambda: model.closed, 1.5, "the upstream stream to be closed")
        assert time.monotonic() - gone < 1.5
        # Nothing of the abandoned turn is in the log, and the run is free.
        assert _kinds(session) == ["input", "text", "input"]
        run = Run.objects.filter(session_id=session).order_by("-created_at").first()
        assert run.status == Run.Status.FAILED and run.lease_until is None
        assert run.error["code"] == "gateway_client_disconnected"
        # The same request again is served at once and runs the turn.
        model.say("Once upon a time.")
        again = chat.send(conversation, headers={"X-Contextproto-Session": session})
    assert again.text == "Once upon a time."
    assert _kinds(session) == ["input", "text", "input", "text"]


@pytest.mark.postgres
@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_client_gone_while_the_upstream_works_closes_the_call_and_frees_the_session(
    gone_live,
):
    application, key = make_app("gone-call")
    with upstream("openai") as model:
        make_version(application, provider="openai", upstream_url=model.url)
        chat = Chat("openai", gone_live.base, key)
        session, conversation = _session_after_hello(chat, model)
        model.say("too late", delay=10)
        body = {"model": "helper", "messages": conversation}
        headers = {"Authorization": f"Bearer {key}", "X-Contextproto-Session": session}
        with pytest.raises(httpx.ReadTimeout):
            httpx.post(gone_live.base + PATH, json=body, headers=headers, timeout=0.7)
        wait_for(lambda: model.closed, 2, "the upstream call to be closed")
        wait_for(
            lambda: not Run.objects.filter(session_id=session, status=Run.Status.RUNNING).exists(),
            2,
            "the run to be freed",
        )
        assert _kinds(session) == ["input", "text", "input"]
        model.say("In time now.")
        again = chat.send(conversation, headers={"X-Contextproto-Session": session})
    assert again.text == "In time now."


@pytest.mark.django_db(transaction=True)
def test_a_database_failure_after_the_stream_began_is_an_error_event_and_a_record(
    app_and_key, scripted, monkeypatch
):
    """In process (the ASGI app on this test's database): the answer's commit fails after its
    text went out; the stream ends with the OpenAI error chunk, the request's record says so,
    and the run is not left claimed."""
    _application, key = app_and_key
    scripted([{"text": "Streaming along."}])

    def broken(*args, **kwargs):
        raise OperationalError("the database went away")

    monkeypatch.setattr(runtime, "turn_commit_locked", broken)
    body = {"model": "helper", "stream": True, "messages": [{"role": "user", "content": "hi"}]}

    async def call() -> httpx.Response:
        transport = httpx.ASGITransport(app=asgi_application)
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as http:
            return await http.post(PATH, json=body, headers={"Authorization": f"Bearer {key}"})

    response = run_coroutine(call())
    assert response.status_code == 200  # the stream had begun
    events = [
        json.loads(line[6:]) for line in response.text.splitlines() if line.startswith("data: {")
    ]
    assert events[1]["choices"][0]["delta"]["content"] == "Streaming along."
    assert events[-1]["error"]["code"] == "dependency_unavailable"
    session = response.headers["x-contextproto-session"]
    record = GatewayExchange.objects.get(session_id=session)
    assert (record.status, record.http_status, record.error_code) == (
        "failed",
        503,
        "dependency_unavailable",
    )
    assert not Run.objects.filter(session_id=session, status=Run.Status.RUNNING).exists()
    assert _kinds(session) == ["input"]
