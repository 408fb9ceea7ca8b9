"""The gateway when things go wrong on the way (contract §14), against uvicorn: the serving process
dies mid-request, the upstream fails after the stream has begun; and what the model said
(thinking included) stays in the session for the next turn."""

from __future__ import annotations

import json
import os
import signal
import threading
import urllib.request
from datetime import timedelta

import anthropic
import openai
import pytest
from django.utils import timezone

from sessions_app.models import Message, Run, Session
from tests.gateway.clients import Chat
from tests.gateway.live import gateway_server, make_app, make_version, upstream
from tests.servers import wait_for

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

NOTE = ("context_task_memory_set", {"purpose": "remember", "memory": "tea"})


def _server_pid(base: str) -> int:
    """The uvicorn process listening on `base`'s port (one worker: the process itself)."""
    port = base.rsplit(":", 1)[1]
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            command = open(f"/proc/{entry}/cmdline", "rb").read().split(b"\0")
        except OSError:
            continue
        if b"uvicorn" in b" ".join(command) and port.encode() in command:
            return int(entry)
    raise AssertionError(f"no uvicorn process on port {port}")


@pytest.mark.django_db(transaction=True)
def test_a_session_is_free_again_soon_after_its_serving_process_dies(tmp_path):
    application, key = make_app()
    with upstream("openai") as model:
        make_version(application, provider="openai", upstream_url=model.url)
        model.say("never delivered", delay=30)
        model.say("Here it is.")
        chat_key: dict[str, str] = {}
        with gateway_server(tmp_path / "first", GATEWAY_LEASE_SECONDS="4") as base:
            chat = Chat("openai", base, key)

            def doomed() -> None:
                try:
                    chat.send([chat.user("question")], headers={"Idempotency-Key": "q-1"})
                except openai.APIConnectionError:
                    pass

            thread = threading.Thread(target=doomed, daemon=True)
            thread.start()
            wait_for(lambda: model.received, 15, "the upstream call")
            session = Session.objects.get()
            chat_key["id"] = str(session.pk)
            os.kill(_server_pid(base), signal.SIGKILL)
            killed = timezone.now()
        thread.join(5)
        # The dead request's lease runs out at most GATEWAY_LEASE_SECONDS after its last renewal.
        run = Run.objects.get(session=session)
        assert run.status == Run.Status.RUNNING and run.via_gateway
        assert run.lease_until <= killed + timedelta(seconds=4)
        with gateway_server(tmp_path / "second", GATEWAY_LEASE_SECONDS="4") as base:
            chat = Chat("openai", base, key)
            retry = {"Idempotency-Key": "q-1"}
            if timezone.now() < run.lease_until - timedelta(seconds=1):
                busy = chat.error([chat.user("question")], headers=retry)
                assert busy.status_code == 409  # the lease has not run out yet
            wait_for(lambda: timezone.now() > run.lease_until, 10, "the lease to run out")
            # The SDK's retry of the same request (same key) now goes through, in the session
            # the dead request started.
            again = chat.send([chat.user("question")], headers=retry)
            assert again.session == chat_key["id"]
    assert again.text == "Here it is."
    log = Message.objects.filter(session_id=chat_key["id"]).order_by("index")
    assert [(m.kind, m.content) for m in log] == [("input", "question"), ("text", "Here it is.")]
    assert Run.objects.filter(session_id=chat_key["id"]).count() == 1


@pytest.fixture(scope="module")
def live(django_db_setup, django_db_blocker, tmp_path_factory):
    with gateway_server(tmp_path_factory.mktemp("gateway-failures")) as base:
        yield base


@pytest.mark.parametrize("fmt", ["openai", "anthropic"])
@pytest.mark.django_db(transaction=True)
def test_a_failure_after_the_stream_began_is_an_error_event_and_the_retry_continues(live, fmt):
    application, key = make_app()
    with upstream("anthropic") as model:
        make_version(application, provider="anthropic", upstream_url=model.url)
        model.answer_with("Noting it.", [("toolu_1", *NOTE)])
        model.fail(500, "overloaded")
        model.say("Done.")
        chat = Chat(fmt, live, key, stream=True)
        messages = [chat.user("remember tea")]
        errors = (openai.APIError, anthropic.APIError)
        with pytest.raises(errors):
            chat.send(messages, headers={"Idempotency-Key": f"s-{fmt}"})
        session = Session.objects.get(application=application)
        retry = Chat(fmt, live, key).send(
            messages, headers={"X-Contextproto-Session": str(session.pk)}
        )
    # The retry ran the failed turn again: the reply holds every answer since the question.
    assert retry.text == "Noting it.\n\nDone."
    assert len(model.requests) == 3
    assert Message.objects.filter(session=session, kind="input").count() == 1


@pytest.mark.django_db(transaction=True)
def test_thinking_blocks_go_back_to_anthropic_unchanged_and_text_beside_a_call_stays(live):
    application, key = make_app()
    thinking = {"type": "thinking", "thinking": "The user likes tea.", "signature": "sig-123=="}
    with upstream("anthropic") as model:
        make_version(application, provider="anthropic", upstream_url=model.url)
        model.answer_with("Noting it.", [("toolu_9", *NOTE)], thinking=[thinking])
        model.say("Noted.")
        chat = Chat("anthropic", live, key)
        result = chat.send([chat.user("I like tea")])
    assert result.text == "Noting it.\n\nNoted."
    second = model.requests[1]
    answer = next(m for m in second["messages"] if m["role"] == "assistant")
    assert answer["content"][0] == thinking
    assert [b["type"] for b in answer["content"]] == ["thinking", "text", "tool_use"]
    assert answer["content"][1]["text"] == "Noting it."
    call = Message.objects.get(session_id=result.session, kind="tool_call")
    assert call.content == [thinking, {"type": "text", "text": "Noting it."}]
    assert "sig-123==" not in json.dumps(result.message)  # the client never sees thinking


@pytest.mark.parametrize("fmt", ["openai", "anthropic"])
@pytest.mark.django_db(transaction=True)
def test_a_stream_keeps_the_connection_alive_while_the_model_works(tmp_path, fmt):
    application, key = make_app()
    with upstream("openai") as model:
        make_version(application, provider="openai", upstream_url=model.url)
        model.answer_with("Noting it.", [("call_1", *NOTE)])
        model.say("Done.", delay=2)
        with gateway_server(tmp_path, GATEWAY_KEEPALIVE_SECONDS="0.3") as base:
            path = "/gateway/openai/v1/chat/completions"
            body: dict = {
                "model": "helper",
                "stream": True,
                "messages": [{"role": "user", "content": "tea"}],
            }
            if fmt == "anthropic":
                path, body["max_tokens"] = "/gateway/anthropic/v1/messages", 64
            request = urllib.request.Request(
                base + path,
                data=json.dumps(body).encode(),
                headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
            )
            with urllib.request.urlopen(request, timeout=30) as response:
                assert response.headers["content-type"].startswith("text/event-stream")
                stream = response.read().decode()
    keepalive = ": keepalive" if fmt == "openai" else "event: ping"
    first_text, final_text = stream.index("Noting it."), stream.index("Done.")
    # Keep-alives went out between the first answer and the slow second one.
    assert stream.count(keepalive, first_text, final_text) >= 3


@pytest.mark.django_db(transaction=True)
def test_a_model_call_longer_than_the_lease_keeps_the_session_busy(tmp_path):
    application, key = make_app()
    with upstream("openai") as model:
        make_version(application, provider="openai", upstream_url=model.url)
        model.say("slowly", delay=5)
        with gateway_server(
            tmp_path, GATEWAY_LEASE_SECONDS="2", GATEWAY_UPSTREAM_TIMEOUT_SECONDS="10"
        ) as base:
            chat = Chat("openai", base, key)
            result: dict = {}
            thread = threading.Thread(
                target=lambda: result.update(reply=chat.send([chat.user("q")])), daemon=True
            )
            thread.start()
            wait_for(lambda: model.received, 15, "the upstream call")
            session = Session.objects.get(application=application)
            # Past two leases: only renewals keep the session held.
            wait_for(lambda: timezone.now() > session.created_at + timedelta(seconds=4), 10, "4 s")
            busy = chat.error(
                [chat.user("other")], headers={"X-Contextproto-Session": str(session.pk)}
            )
            thread.join(15)
    assert busy.status_code == 409
    assert result["reply"].text == "slowly"
