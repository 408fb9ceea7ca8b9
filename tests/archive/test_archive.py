"""Cold archive (contract §2.3): every reader merges hot and cold; restore gives the same log
back."""

from __future__ import annotations

import itertools
import json
import threading
import zlib
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import IntegrityError, InternalError, connection, transaction
from django.test.utils import override_settings
from django.utils import timezone

from sessions_app.models import ArchiveChunk, ImmutableMessageError, Message, Session
from sessions_app.reads import raw_log
from sessions_app.services import archive
from sessions_app.services.messages import NewMessage, message_write
from sessions_app.services.runs import run_start
from sessions_app.services.sessions import session_create
from sessions_app.store import codec, cold_store
from sessions_app.tasks_archive import ARCHIVE_SWEEP_TASK, archive_sweep
from tests.builders.bulk import bulk_history
from tests.builders.dumps import hot_dump, projections, reader_dump
from tests.builders.sessions import rich_session


def texts(session, count: int) -> None:
    for n in range(count):
        message_write(
            session_id=session.id,
            message=NewMessage(role="assistant", kind="text", content=f"t{n}"),
        )


def chunk_ranges(session_id) -> list[tuple[int, int]]:
    return list(
        ArchiveChunk.objects.filter(session_id=session_id)
        .order_by("first_index")
        .values_list("first_index", "last_index")
    )


def test_every_reader_returns_the_same_after_archiving_and_after_restore(api_session):
    s = rich_session(api_session)
    log, readers = hot_dump(s.id), reader_dump(s.id)
    total = len(log)

    chunks = archive.archive_session(session_id=s.id, keep_last=5, chunk_size=4)

    assert chunks and chunk_ranges(s.id) == [(n, n + 3) for n in range(1, total - 7, 4)]
    archived = sum(c.message_count for c in chunks)
    assert total - archived >= 5
    assert Message.objects.filter(session_id=s.id).count() == total - archived
    assert reader_dump(s.id) == readers

    assert archive.restore_session(session_id=s.id) == archived
    assert not ArchiveChunk.objects.filter(session_id=s.id).exists()
    assert hot_dump(s.id) == log
    assert reader_dump(s.id) == readers


def test_projection_is_byte_identical_before_and_after_archiving(api_session):
    s = rich_session(api_session)
    before = projections(s.id)
    archive.archive_session(session_id=s.id, keep_last=2, chunk_size=3)
    assert ArchiveChunk.objects.filter(session_id=s.id).count() >= 5
    after = projections(s.id)
    assert json.dumps(after, sort_keys=True) == json.dumps(before, sort_keys=True)
    archive.restore_session(session_id=s.id)
    assert json.dumps(projections(s.id), sort_keys=True) == json.dumps(before, sort_keys=True)


def test_everything_can_be_archived_and_the_view_still_builds(api_session):
    s = rich_session(api_session)
    total = len(hot_dump(s.id))
    before = projections(s.id)
    archive.archive_session(session_id=s.id, keep_last=0, chunk_size=1)
    assert not Message.objects.filter(session_id=s.id).exists()
    assert len(chunk_ranges(s.id)) == total
    assert projections(s.id) == before


def test_restore_keeps_ids_indices_windows_runs_and_pairing(api_session):
    s = rich_session(api_session)
    before = {
        str(m.id): (m.index, m.window_id, m.run_id, m.tool_call_id, m.kind, m.created_at)
        for m in Message.objects.filter(session_id=s.id)
    }
    archive.archive_session(session_id=s.id, keep_last=0, chunk_size=5)
    archive.restore_session(session_id=s.id)
    after = {
        str(m.id): (m.index, m.window_id, m.run_id, m.tool_call_id, m.kind, m.created_at)
        for m in Message.objects.filter(session_id=s.id)
    }
    assert after == before
    calls = {v[3]: v[0] for v in after.values() if v[4] == "tool_call"}
    results = {v[3]: v[0] for v in after.values() if v[4] == "tool_result"}
    assert calls.keys() == results.keys()
    assert all(results[c] > calls[c] for c in calls)


def test_chunks_hold_every_column_as_zlib_json(session):
    run_start(session_id=session.id, content=[{"type": "text", "text": "héllo 😀"}])
    texts(session, 3)
    rows = {m.index: m for m in Message.objects.filter(session=session)}
    [chunk] = archive.archive_session(session_id=session.id, keep_last=0, chunk_size=4)
    payload = json.loads(zlib.decompress(bytes(chunk.data)))
    assert payload["v"] == 1
    records = payload["messages"]
    assert [r["index"] for r in records] == [1, 2, 3, 4]
    first = rows[1]
    # Every column of the row but the session it belongs to (the engine's fields and the
    # revision and fork link a restore must put back).
    columns = {f.attname for f in Message._meta.concrete_fields} - {"session_id"}
    assert set(records[0]) == columns
    assert set(codec.RAW_COLUMNS) < columns
    assert records[0]["written_at_revision"] == first.written_at_revision == 1
    assert records[0]["id"] == str(first.id)
    assert records[0]["run_id"] == str(first.run_id)
    assert records[0]["input_run"] == first.input_run
    assert records[0]["content"] == [{"type": "text", "text": "héllo 😀"}]
    assert records[0]["created_at"] == first.created_at.isoformat()
    assert (chunk.first_index, chunk.last_index, chunk.message_count) == (1, 4, 4)


def test_archiving_is_idempotent_keeps_the_newest_and_moves_whole_chunks(session):
    texts(session, 23)
    first = archive.archive_session(session_id=session.id, keep_last=5, chunk_size=4)
    assert chunk_ranges(session.id) == [(1, 4), (5, 8), (9, 12), (13, 16)]
    assert archive.archive_session(session_id=session.id, keep_last=5, chunk_size=4) == []
    # Hot: #17..#23, at least the newest five; the next chunk waits until it is whole.
    hot = Message.objects.filter(session=session).order_by("index")
    assert [m.index for m in hot] == list(range(17, 24))
    texts(session, 2)
    more = archive.archive_session(session_id=session.id, keep_last=5, chunk_size=4)
    assert [(c.first_index, c.last_index) for c in more] == [(17, 20)]
    assert len(first) == 4
    page = raw_log.log_page(session.id, window_id=None, after_index=0, limit=100)
    assert [m.index for m in page] == list(range(1, 26))


def test_a_range_read_decompresses_only_the_chunks_it_overlaps(session, monkeypatch):
    texts(session, 40)
    archive.archive_session(session_id=session.id, keep_last=0, chunk_size=10)
    decoded: list[int] = []
    real = cold_store.chunk_records

    def counting(chunk):
        decoded.append(chunk.first_index)
        return real(chunk)

    monkeypatch.setattr(cold_store, "chunk_records", counting)
    window = raw_log.log_window(session.id, "main", 15, 25)
    assert [m.index for m in window] == list(range(16, 26))
    assert decoded == [11, 21]
    decoded.clear()
    page = raw_log.log_page(session.id, window_id=None, after_index=12, limit=3)
    assert [m.index for m in page] == [13, 14, 15]
    assert decoded == [11]
    decoded.clear()
    assert raw_log.log_windows_of(session.id, [5, 35]) == {5: "main", 35: "main"}
    assert decoded == [1, 31]
    decoded.clear()
    ids = [m.id for m in raw_log.log_window(session.id, "main", 0, 40)]
    decoded.clear()
    found = raw_log.log_by_ids(session.id, ids[20:22], index_range=(21, 22))
    assert [m.index for m in found] == [21, 22]
    assert decoded == [21]


def test_a_big_session_reads_the_same_from_hot_and_cold(session):
    bulk_history(session, total=3000, windows=8)
    run_start(session_id=session.id, content="go")
    upper = Session.objects.get(pk=session.pk).last_index
    windows = sorted(
        set(Message.objects.filter(session=session).values_list("window_id", flat=True))
    )
    before = {w: raw_log.log_window(session.id, w, 0, upper) for w in windows}
    before_pages = raw_log.log_page(session.id, window_id="w03", after_index=100, limit=50)
    chunks = archive.archive_session(session_id=session.id, keep_last=400, chunk_size=500)
    assert len(chunks) == 5
    assert {w: raw_log.log_window(session.id, w, 0, upper) for w in windows} == before
    assert raw_log.log_page(session.id, window_id="w03", after_index=100, limit=50) == (
        before_pages
    )


def test_restore_of_a_session_without_chunks_restores_nothing(session):
    texts(session, 3)
    assert archive.restore_session(session_id=session.id) == 0
    assert Message.objects.filter(session=session).count() == 3


def test_orm_guard_still_refuses_deletes_after_archiving(session):
    texts(session, 6)
    archive.archive_session(session_id=session.id, keep_last=2, chunk_size=2)
    with pytest.raises(ImmutableMessageError):
        Message.objects.filter(session=session).delete()


@pytest.mark.postgres
def test_postgres_archive_passes_the_trigger_only_through_its_flag(session):
    texts(session, 6)
    archive.archive_session(session_id=session.id, keep_last=2, chunk_size=2)
    assert Message.objects.filter(session=session).count() == 2
    # Same outer transaction: the flag was switched off again right after the move.
    with pytest.raises((IntegrityError, InternalError), match="immutable"):
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(
                "DELETE FROM sessions_app_message WHERE session_id = %s", [str(session.id)]
            )
    assert Message.objects.filter(session=session).count() == 2


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_postgres_plain_delete_fails_after_an_archive_transaction(application, make_version):
    session, _ = session_create(agent_version=make_version(application))
    texts(session, 6)
    archive.archive_session(session_id=session.id, keep_last=2, chunk_size=2)
    with pytest.raises((IntegrityError, InternalError), match="immutable"):
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(
                "DELETE FROM sessions_app_message WHERE session_id = %s", [str(session.id)]
            )
    with connection.cursor() as cursor:
        cursor.execute("SHOW contextproto.allow_message_delete")
        assert cursor.fetchone()[0] in ("", "off")
    assert Message.objects.filter(session=session).count() == 2


def test_sweep_archives_only_old_messages_of_sessions_with_work(application, make_version):
    version = make_version(application)
    busy, _ = session_create(agent_version=version)
    quiet, _ = session_create(agent_version=version)
    texts(busy, 12)
    texts(quiet, 3)
    Session.objects.filter(pk__in=[busy.pk, quiet.pk]).update(
        created_at=timezone.now() - timedelta(hours=2)
    )
    nothing = archive.archive_old_messages(
        older_than_seconds=3600, keep_last=2, chunk_size=5, limit_sessions=10
    )
    assert nothing.chunks == 0
    assert archive.archive_candidates(
        older_than=timezone.now(), keep_last=2, chunk_size=5, limit_sessions=10
    ) == [busy.id]
    sweep = archive.archive_old_messages(
        older_than_seconds=0, keep_last=2, chunk_size=5, limit_sessions=10
    )
    assert (sweep.sessions, sweep.chunks, sweep.messages, sweep.failed) == (1, 2, 10, ())
    assert chunk_ranges(busy.id) == [(1, 5), (6, 10)]
    assert not ArchiveChunk.objects.filter(session=quiet).exists()


@override_settings(
    ARCHIVE_OLDER_THAN_SECONDS=0,
    ARCHIVE_KEEP_LAST=3,
    ARCHIVE_CHUNK_SIZE=4,
    ARCHIVE_SESSIONS_PER_SWEEP=5,
)
def test_periodic_task_archives(session):
    texts(session, 11)
    Session.objects.filter(pk=session.pk).update(created_at=timezone.now().replace(year=2000))
    assert archive_sweep.name == ARCHIVE_SWEEP_TASK
    result = archive_sweep.apply().get()
    assert result == {"sessions": 1, "chunks": 2, "messages": 8, "failed": []}
    assert chunk_ranges(session.id) == [(1, 4), (5, 8)]
    assert archive_sweep() == {"sessions": 0, "chunks": 0, "messages": 0, "failed": []}


def test_management_command_archives_and_restores(session, capsys):
    texts(session, 10)
    log = hot_dump(session.id)
    sid = str(session.id)
    call_command("archive_messages", "--session", sid, "--keep-last", "2", "--chunk-size", "3")
    assert "archived 6 messages in 2 chunks" in capsys.readouterr().out
    assert chunk_ranges(session.id) == [(1, 3), (4, 6)]
    call_command("archive_messages", "--keep-last", "0", "--chunk-size", "2")
    assert "archived 4 messages in 2 chunks of 1 sessions" in capsys.readouterr().out
    call_command("archive_messages", "--session", sid, "--restore")
    assert f"restored 10 messages of session {sid}" in capsys.readouterr().out
    assert hot_dump(session.id) == log
    with pytest.raises(CommandError, match="--restore needs --session"):
        call_command("archive_messages", "--restore")
    with pytest.raises(CommandError, match="not_found"):
        call_command("archive_messages", "--session", "0" * 32, "--restore")


def test_fold_read_and_history_list_read_archived_messages(api_session):
    s = api_session(version=2)
    s.input("start")
    a1, _ = s.host_tool_work("lookup", "first 价格")
    _, a2 = s.host_tool_work("lookup", "second 😀")
    fold_id = s.tool(
        "context_fold_create", fromIndex=a1, throughIndex=a2, summary="s", expectedWindowId="main"
    )["foldId"]
    history = s.tool("context_history_list")
    read = s.tool("context_fold_read", foldId=fold_id)
    archive.archive_session(session_id=s.id, keep_last=2, chunk_size=2)
    assert ArchiveChunk.objects.filter(session_id=s.id, first_index__lte=a2).exists()
    later = s.tool("context_history_list")
    assert later["groups"][: len(history["groups"])] == history["groups"]
    again = s.tool("context_fold_read", foldId=fold_id)
    assert again == read
    assert [m["index"] for m in json.loads(again["text"])] == [a1, a1 + 1, a2 - 1, a2]


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_postgres_archiving_while_writers_append_loses_and_doubles_nothing(
    application, make_version
):
    session, _ = session_create(agent_version=make_version(application))
    texts(session, 100)
    writers, per_writer = 4, 60
    barrier = threading.Barrier(writers + 1)
    errors: list[BaseException] = []

    def write() -> None:
        try:
            barrier.wait()
            texts(session, per_writer)
        except BaseException as exc:  # surfaced by the assertion below
            errors.append(exc)
        finally:
            connection.close()

    def archive_loop() -> None:
        try:
            barrier.wait()
            for _ in range(20):
                archive.archive_session(session_id=session.id, keep_last=10, chunk_size=7)
        except BaseException as exc:
            errors.append(exc)
        finally:
            connection.close()

    pool = [threading.Thread(target=write) for _ in range(writers)]
    pool.append(threading.Thread(target=archive_loop))
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()
    assert errors == []
    total = 100 + writers * per_writer
    ranges = chunk_ranges(session.id)
    assert ranges and all(b[0] == a[1] + 1 for a, b in itertools.pairwise(ranges))
    hot = list(Message.objects.filter(session=session).values_list("index", flat=True))
    assert sorted(hot) == list(range(ranges[-1][1] + 1, total + 1))
    page = raw_log.log_page(session.id, window_id=None, after_index=0, limit=10_000)
    assert [m.index for m in page] == list(range(1, total + 1))


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_postgres_readers_see_the_whole_log_while_it_moves(application, make_version):
    session, _ = session_create(agent_version=make_version(application))
    texts(session, 120)
    run_start(session_id=session.id, content="go")
    run_hex = session.runs.get().id.hex
    expected = list(range(1, 122))
    stop = threading.Event()
    errors: list[BaseException] = []
    reads = []

    def read() -> None:
        try:
            while not stop.is_set():
                window = raw_log.log_window(session.id, "main", 0, 121)
                page = raw_log.log_page(session.id, window_id=None, after_index=30, limit=50)
                inputs = raw_log.log_run_inputs(session.id, run_hex, 121)
                reads.append(
                    (
                        [m.index for m in window] == expected,
                        [m.index for m in page] == list(range(31, 81)),
                        [m.index for m in inputs] == [121],
                    )
                )
        except BaseException as exc:
            errors.append(exc)
        finally:
            connection.close()

    def move() -> None:
        try:
            for _ in range(8):
                archive.archive_session(session_id=session.id, keep_last=0, chunk_size=11)
                archive.restore_session(session_id=session.id)
        except BaseException as exc:
            errors.append(exc)
        finally:
            stop.set()
            connection.close()

    pool = [threading.Thread(target=read) for _ in range(3)] + [threading.Thread(target=move)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()
    assert errors == []
    assert reads and all(all(r) for r in reads)
