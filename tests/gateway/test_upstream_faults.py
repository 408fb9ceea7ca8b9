"""An upstream that fails the way real ones do (contract §14, issue 38), against uvicorn.

A body cut short, an HTML error page, a dropped connection, an answer slower than the
version's own `timeoutSeconds`: each is answered 502 or 504 in the client's wire (never 500),
nothing of the failed turn is written, the session is not left busy, and the same request
sent again at once runs the turn (no `session_busy`). Streamed and not.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from sessions_app.models import GatewayExchange, Message, Run
from tests.gateway.clients import Chat, error_code
from tests.gateway.live import Live, gateway_server, make_app, make_version, upstream
from tests.providers.servers import Answer

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

TIMEOUT = 1  # the version's model.config.timeoutSeconds; the server's default is 3 s

FAULTS = {
    "a body cut short": (Answer(body='{"id": "chatcmpl-1", "object": "chat.compl'), 502),
    "an HTML page": (
        Answer(body="<html><body>Bad gateway</body></html>", headers={"Content-Type": "text/html"}),
        502,
    ),
    "a dropped connection": (Answer(drop=True), 502),
    "an answer past timeoutSeconds": (Answer(body={"never": "read"}, delay=TIMEOUT + 1.5), 504),
}


@pytest.fixture(scope="module")
def faults_live(django_db_setup, django_db_blocker, tmp_path_factory) -> Iterator[Live]:
    tmp = tmp_path_factory.mktemp("faults")
    with gateway_server(tmp) as base:
        yield Live(base, tmp / "server.log")


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
@pytest.mark.parametrize("fault", list(FAULTS))
@pytest.mark.parametrize("provider", ["openai", "anthropic"])
@pytest.mark.django_db(transaction=True)
def test_a_broken_upstream_answer_is_502_or_504_and_the_same_request_then_runs(
    faults_live, provider, fault, stream
):
    answer, status = FAULTS[fault]
    application, key = make_app("faults")
    with upstream(provider) as model:
        make_version(
            application,
            provider=provider,
            upstream_url=model.url,
            config={"timeoutSeconds": TIMEOUT},
        )
        # The client speaks the other API: what fails is the upstream, whatever the client.
        client = "anthropic" if provider == "openai" else "openai"
        chat = Chat(client, faults_live.base, key, stream=stream)
        model.say("Hello.")
        first = chat.send([chat.user("hi")])
        session = first.session
        conversation = [chat.user("hi"), first.message, chat.user("and now?")]
        headers = {"X-Contextproto-Session": session}

        model.queue.append(answer)
        started = time.monotonic()
        refused = chat.error(conversation, headers=headers)
        took = time.monotonic() - started
        assert refused.status_code == status, refused.response.text
        code = "gateway_upstream_timeout" if status == 504 else "gateway_upstream_failed"
        assert error_code(refused) == code
        assert f"{provider} {provider}-model" in refused.message  # the upstream, not a stack
        assert refused.response.headers["retry-after"]
        if status == 504:
            assert took < TIMEOUT + 1.2  # the version's timeout, not the server's 3 s
        # Nothing of the failed turn: the log holds the new input and no answer to it.
        kinds = list(
            Message.objects.filter(session_id=session)
            .order_by("index")
            .values_list("kind", flat=True)
        )
        assert kinds == ["input", "text", "input"]
        run = Run.objects.filter(session_id=session).order_by("-created_at").first()
        assert run.status == Run.Status.FAILED and run.lease_until is None
        assert run.error["code"] == code
        record = GatewayExchange.objects.filter(session_id=session).order_by("-created_at").first()
        assert (record.status, record.http_status, record.error_code) == ("failed", status, code)

        # The same request again runs the turn at once: the session is not busy.
        model.say("Now it works.")
        again = chat.send(conversation, headers=headers)
        assert again.text == "Now it works."
    kinds = list(
        Message.objects.filter(session_id=session).order_by("index").values_list("kind", flat=True)
    )
    assert kinds == ["input", "text", "input", "text"]
