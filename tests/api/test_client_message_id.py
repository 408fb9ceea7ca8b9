"""Hosts retry writes safely: a clientMessageId replays the first write (idempotency key)."""

from __future__ import annotations

import threading

import pytest
from django.db import connection

from sessions_app.models import Message, Run
from sessions_app.services.archive import archive_session


def post(handle, tail: str, body: dict):
    return handle.client.post(handle.path(tail), body)


def test_a_retried_input_is_replayed_not_written_twice(api_session):
    s = api_session()
    first = post(s, "inputs/", {"content": "quote 5000", "clientMessageId": "in-1"})
    assert first.status_code == 201 and "Idempotent-Replayed" not in first
    again = post(s, "inputs/", {"content": "quote 5000", "clientMessageId": "in-1"})
    assert again.status_code == 200
    assert again["Idempotent-Replayed"] == "true"
    assert again.json() == first.json()
    assert Message.objects.filter(session_id=s.id, kind="input").count() == 1
    assert Run.objects.filter(session_id=s.id).count() == 1


def test_a_retried_text_message_is_replayed(api_session):
    s = api_session()
    s.input("hi")
    body = {"role": "assistant", "kind": "text", "content": "hello", "clientMessageId": "t-1"}
    first = post(s, "messages/", body)
    again = post(s, "messages/", body)
    assert (first.status_code, again.status_code) == (201, 200)
    assert again.json() == first.json()
    assert Message.objects.filter(session_id=s.id, kind="text").count() == 1


def test_a_retried_host_tool_result_is_replayed_instead_of_already_answered(api_session):
    s = api_session()
    s.input("hi")
    snapshot = s.project()
    s.write(
        role="assistant",
        kind="tool_call",
        content="",
        toolCallId="h1",
        toolName="lookup",
        arguments={},
        snapshotId=snapshot["snapshotId"],
    )
    body = {"role": "tool", "kind": "tool_result", "content": "42", "toolCallId": "h1"}
    first = post(s, "messages/", {**body, "clientMessageId": "r-1"})
    again = post(s, "messages/", {**body, "clientMessageId": "r-1"})
    assert (first.status_code, again.status_code) == (201, 200)
    unkeyed = post(s, "messages/", body)
    assert unkeyed.status_code == 400  # without the key a retry is a second answer


def test_the_same_id_with_another_request_is_a_409(api_session):
    s = api_session()
    s.input("hi")
    post(
        s,
        "messages/",
        {"role": "assistant", "kind": "text", "content": "a", "clientMessageId": "x"},
    )
    other = post(
        s,
        "messages/",
        {"role": "assistant", "kind": "text", "content": "b", "clientMessageId": "x"},
    )
    assert other.status_code == 409
    error = other.json()["error"]
    assert error["code"] == "client_message_id_reused"
    assert error["details"]["field"] == "clientMessageId"
    assert Message.objects.filter(session_id=s.id, kind="text").count() == 1


def test_ids_are_scoped_to_their_session(api_session):
    a, b = api_session(), api_session(version=3)
    assert post(a, "inputs/", {"content": "x", "clientMessageId": "same"}).status_code == 201
    assert post(b, "inputs/", {"content": "x", "clientMessageId": "same"}).status_code == 201


def test_a_refused_write_keeps_its_id_free(api_session):
    s = api_session()
    s.input("hi")
    refused = post(
        s,
        "messages/",
        {
            "role": "tool",
            "kind": "tool_result",
            "content": "x",
            "toolCallId": "nope",
            "clientMessageId": "k",
        },
    )
    assert refused.status_code == 400
    ok = post(
        s,
        "messages/",
        {"role": "assistant", "kind": "text", "content": "y", "clientMessageId": "k"},
    )
    assert ok.status_code == 201


def test_a_replay_finds_an_archived_message(api_session):
    s = api_session()
    first = post(s, "inputs/", {"content": "old", "clientMessageId": "in-old"})
    for n in range(5):
        s.input(f"later {n}")
    assert archive_session(session_id=s.id, keep_last=2, chunk_size=2)
    assert not Message.objects.filter(session_id=s.id, index=first.json()["index"]).exists()
    again = post(s, "inputs/", {"content": "old", "clientMessageId": "in-old"})
    assert again.status_code == 200
    assert again.json()["message"] == first.json()["message"]


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_concurrent_retries_write_one_message(api_session):
    s = api_session()
    barrier = threading.Barrier(8)
    statuses, errors = [], []

    def worker():
        try:
            barrier.wait()
            response = post(s, "inputs/", {"content": "once", "clientMessageId": "race"})
            statuses.append(response.status_code)
        except BaseException as exc:
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert sorted(statuses) == [200] * 7 + [201]
    assert Message.objects.filter(session_id=s.id, kind="input").count() == 1
