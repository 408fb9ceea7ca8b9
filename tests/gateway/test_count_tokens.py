"""Counting tokens (contract §19, §21; issue 40 item 4): the size of the view the request would
make the model see now — the managed view, not the history the client resends — and nothing
written. Anthropic's `…/messages/count_tokens` (with and without the base URL's `/v1`)."""

from __future__ import annotations

from django.db import transaction

from contextproto.protocol import state as kvkeys
from contextproto.protocol.tokens import json_tokens
from sessions_app.models import GatewayExchange, Message, Session
from sessions_app.store.state import kv_apply_locked, session_lock

LONG = "A long paragraph the model wrote. " * 60  # ~2,000 characters a message


def test_count_tokens_is_the_managed_views_size_not_the_resent_history(gateway, scripted):
    scripted([{"text": f"Answer {n}. {LONG}"} for n in range(6)], wire="anthropic-messages")
    history: list[dict] = []
    key = ""
    for n in range(6):
        history.append({"role": "user", "content": f"Question {n}. {LONG}"})
        body = {"model": "helper", "max_tokens": 100, "messages": history}
        reply = gateway.anthropic(body, key=key or None)
        key = key or reply["X-Contextproto-Session-Key"]
        history.append({"role": "assistant", "content": reply.json()["content"]})
    session = Session.objects.get(pk=reply["X-Contextproto-Session"])
    history.append({"role": "user", "content": "One more question."})
    path = "/gateway/anthropic/v1/messages/count_tokens"
    whole = gateway.post(path, {"model": "helper", "messages": history}, key=key).json()
    # A checkpoint now covers the first ten messages of the window (as maintenance would).
    with transaction.atomic():
        kv_apply_locked(
            session_lock(session.id),
            {
                kvkeys.checkpoint_key("main"): "The user asked five questions; all answered.",
                kvkeys.covered_key("main"): 10,
            },
        )
    before = Message.objects.count()
    covered = json_tokens(history[:10])
    for counting in (path, "/gateway/anthropic/messages/count_tokens"):
        counted = gateway.post(counting, {"model": "helper", "messages": history}, key=key)
        assert counted.status_code == 200, counted.content
        tokens = counted.json()["input_tokens"]
        assert counted["X-Contextproto-Estimated"] == "true"  # a scripted model has no counter
        # The view the model would see now: the covered messages are gone from it, whatever
        # the client resends.
        assert tokens < whole["input_tokens"] - covered * 0.8, (tokens, whole, covered)
    # Nothing written: no message, no run claimed, no request left running.
    assert Message.objects.count() == before
    assert GatewayExchange.objects.filter(status="running").count() == 0


def test_count_tokens_refuses_what_the_turn_would_refuse(gateway, scripted):
    scripted([{"text": "ok"}], wire="anthropic-messages")
    refused = gateway.post(
        "/gateway/anthropic/v1/messages/count_tokens",
        {"model": "nobody", "messages": [{"role": "user", "content": "hi"}]},
    )
    assert refused.status_code == 404
    assert refused.json()["error"]["code"] == "gateway_model_not_found"
    assert Session.objects.count() == 0


def test_counting_the_last_exchange_again_is_nothing_new_not_a_defect(gateway, scripted):
    scripted([{"text": "ok"}], wire="anthropic-messages")
    body = {"model": "helper", "max_tokens": 50, "messages": [{"role": "user", "content": "hi"}]}
    first = gateway.anthropic(body)
    key = first["X-Contextproto-Session-Key"]
    counted = gateway.post(
        "/gateway/anthropic/v1/messages/count_tokens",
        {"model": "helper", "messages": body["messages"]},
        key=key,
    )
    assert counted.status_code == 400, counted.content
    assert counted.json()["error"]["code"] == "gateway_nothing_new"
