"""The raw log: gapless indices under concurrency, immutability in the ORM and in PostgreSQL."""

from __future__ import annotations

import threading

import pytest
from django.db import IntegrityError, InternalError, connection, transaction

from sessions_app.models import ImmutableMessageError, Message
from sessions_app.services.messages import NewMessage, message_write
from sessions_app.services.sessions import session_create


def append_text(session, text: str = "hello") -> Message:
    return message_write(
        session_id=session.id, message=NewMessage(role="assistant", kind="text", content=text)
    )


def test_indices_start_at_one_and_follow_the_active_window(session):
    first = append_text(session)
    second = append_text(session)
    assert (first.index, second.index) == (1, 2)
    assert first.window_id == "main"
    session.refresh_from_db()
    assert session.next_message_index == 3


def test_role_must_match_kind(session):
    with pytest.raises(ValueError, match="needs role"):
        message_write(
            session_id=session.id, message=NewMessage(role="user", kind="text", content="x")
        )
    assert not Message.objects.filter(session=session).exists()


def test_orm_refuses_to_change_or_delete_a_message(session):
    message = append_text(session)
    message.content = "rewritten"
    with pytest.raises(ImmutableMessageError):
        message.save()
    with pytest.raises(ImmutableMessageError):
        message.delete()
    with pytest.raises(ImmutableMessageError):
        Message.objects.filter(pk=message.pk).update(content="x")
    with pytest.raises(ImmutableMessageError):
        Message.objects.filter(pk=message.pk).delete()
    assert Message.objects.get(pk=message.pk).content == "hello"


@pytest.mark.postgres
@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE sessions_app_message SET content = '\"x\"' WHERE id = %s",
        "DELETE FROM sessions_app_message WHERE id = %s",
    ],
)
def test_postgres_trigger_refuses_update_and_delete(session, statement):
    message = append_text(session)
    with pytest.raises((IntegrityError, InternalError), match="immutable"):
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(statement, [str(message.pk)])
    assert Message.objects.get(pk=message.pk).content == "hello"


@pytest.mark.postgres
def test_postgres_trigger_allows_delete_only_on_the_archive_path(session):
    message = append_text(session)
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL contextproto.allow_message_delete = 'on'")
        cursor.execute("DELETE FROM sessions_app_message WHERE id = %s", [str(message.pk)])
    assert not Message.objects.filter(pk=message.pk).exists()


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_concurrent_appends_get_gapless_unique_indices(application, make_version):
    session, _ = session_create(agent_version=make_version(application))
    threads, per_thread = 8, 200
    barrier = threading.Barrier(threads)
    errors: list[BaseException] = []

    def worker() -> None:
        try:
            barrier.wait()
            for _ in range(per_thread):
                append_text(session)
        except BaseException as exc:  # surfaced by the assertion below
            errors.append(exc)
        finally:
            connection.close()

    pool = [threading.Thread(target=worker) for _ in range(threads)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()

    assert errors == []
    indices = list(
        Message.objects.filter(session=session).order_by("index").values_list("index", flat=True)
    )
    assert indices == list(range(1, threads * per_thread + 1))
    session.refresh_from_db()
    assert session.next_message_index == threads * per_thread + 1
