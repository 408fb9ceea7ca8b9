"""Snapshot bodies stored as deltas read back exactly as the turn built them (issue 33).

Sessions driven through the API with random sequences of operations (inputs, host tool work,
folds, window switches, archive and restore of the log, forks, turns in every wire format),
turns of one session built concurrently by threads, a turn that writes its row and its body
in two commits (issue 42), retention dropping old bodies (also a base between a body's
encoding and its store), and the migration over a database that holds bodies stored before.
Every body is compared with what `projection_build` returned at its turn, after the decoded
bodies this process keeps are forgotten, so each one is decoded from the database.
"""

from __future__ import annotations

import random
import threading
import time
from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.db.migrations.executor import MigrationExecutor
from django.test.utils import override_settings
from django.utils import timezone

from sessions_app.maintenance import body_sweeps
from sessions_app.models import ProjectionSnapshot, Session
from sessions_app.services import archive
from sessions_app.services.fork import session_fork
from sessions_app.services.messages import NewMessage, message_write
from sessions_app.services.projection import projection_build
from sessions_app.store import body_codec, body_retention, body_writer, snapshot_bodies
from tests.builders.sessions import PROVIDERS, bind_host_tools
from tests.conftest import KeyClient

RESULT = "stock list: " + "item {n}: 12 in stock at 1300 EUR, ünïcode; " * 40


def _sent(snapshot: ProjectionSnapshot) -> str:
    return body_codec.body_text(snapshot.view.body)


def _sent_view(view) -> str:
    return body_codec.body_text(view.body)


def _row_fields(snapshot: ProjectionSnapshot) -> dict:
    """The row fields a turn gives the writer, as `projection_build` gave them for `snapshot`."""
    return {
        "session_id": snapshot.session_id,
        "run_id": snapshot.run_id,
        "revision": snapshot.revision,
        "upper_bound": snapshot.upper_bound,
        "window_id": snapshot.window_id,
        "protocol": snapshot.protocol,
        "options": snapshot.options,
        "provider": snapshot.provider,
        "notes": snapshot.notes,
        "build_inputs": snapshot.build_inputs,
    }


def _assert_all_decode(sent: dict[str, str]) -> list[ProjectionSnapshot]:
    """Every snapshot decodes from the database to the text its turn built."""
    snapshot_bodies.forget_cache()
    stored = list(ProjectionSnapshot.objects.filter(pk__in=list(sent)).order_by("created_at"))
    assert len(stored) == len(sent)
    for snapshot in stored:  # one at a time: each decodes its own chain
        assert snapshot.view.origin == "stored"
        assert _sent(snapshot) == sent[str(snapshot.pk)], snapshot.pk
    snapshot_bodies.forget_cache()
    again = list(ProjectionSnapshot.objects.filter(pk__in=list(sent)))
    snapshot_bodies.views_of(again)  # all at once: one read of every chain
    assert {str(s.pk): _sent(s) for s in again} == sent
    return stored


def _random_session(api_session, seed: int, sent: dict[str, str]):
    rng = random.Random(seed)
    s = api_session(protocol="unified", version=rng.choice([2, 4]))
    bind_host_tools(s)
    windows = ["main"]
    current = "main"
    calls: list[tuple[int, int]] = []

    def turn() -> None:
        snapshot = projection_build(session_id=s.id, provider=rng.choice(PROVIDERS))
        sent[str(snapshot.pk)] = _sent(snapshot)

    s.input("prepare a quote for ACME")
    turn()
    for step in range(rng.randint(12, 22)):
        op = rng.choice(
            ["lookup", "lookup", "lookup", "turn", "turn", "fold", "window", "archive", "input"]
        )
        if op == "lookup":
            calls.append(s.host_tool_work("lookup", RESULT.format(n=step) * rng.randint(1, 3)))
        elif op == "input":
            s.input(f"step {step}: and the delivery date? ✓")
        elif op == "fold" and len(calls) >= 2:
            first, last = calls[-2][0], calls[-1][1]
            calls.clear()
            s.tool(
                "context_fold_create",
                fromIndex=first,
                throughIndex=last,
                summary=f"looked up stock ({step})",
                expectedWindowId=current,
            )
        elif op == "window":
            target = rng.choice([w for w in [*windows, f"w{step}"] if w != current])
            arguments = {"windowId": target, "input": f"go on with {target}"}
            if target in windows:
                arguments["resume"] = True
            else:
                arguments["goal"] = f"sub-task {target}"
                windows.append(target)
            result = s.tool("context_window_open", **arguments, expectedWindowId=current)
            if result["success"]:
                current = target
                calls.clear()
        elif op == "archive":
            if archive.archive_session(session_id=s.id, keep_last=3, chunk_size=2) == 0:
                archive.restore_session(session_id=s.id)
        turn()
    return s


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_every_body_of_a_random_session_decodes_to_what_its_turn_sent(api_session, seed):
    sent: dict[str, str] = {}
    with override_settings(SNAPSHOT_KEYFRAME_INTERVAL=4):
        s = _random_session(api_session, seed, sent)
        # A restore of whatever is archived, then a fork at a middle turn and turns on both.
        archive.restore_session(session_id=s.id)
        middle = ProjectionSnapshot.objects.filter(session_id=s.id).order_by("created_at")[
            len(sent) // 2
        ]
        original = Session.objects.get(pk=s.id)
        fork, _key = session_fork(session=original, snapshot_id=middle.pk)
        for session_id in (s.id, fork.id, s.id, fork.id):
            for provider in PROVIDERS:
                built = projection_build(session_id=session_id, provider=provider, use_cache=False)
                sent[str(built.pk)] = _sent(built)
    stored = _assert_all_decode(sent)
    encodings = {s.body_encoding for s in stored}
    assert encodings == {"key", "delta"}, encodings
    assert max(s.body_depth for s in stored) == 3  # a keyframe at least every 4
    # A fork's first body is a keyframe: deltas never cross sessions.
    bases = {x.pk: x for x in ProjectionSnapshot.objects.filter(session_id__in=[s.id, fork.id])}
    for snapshot in stored:
        if snapshot.body_base is not None:
            assert bases[snapshot.body_base].session_id == snapshot.session_id
            assert bases[snapshot.body_base].created_at <= snapshot.created_at
    assert ProjectionSnapshot.objects.filter(session_id=fork.id).order_by("created_at")[
        0
    ].body_encoding in ("key", "json")


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_concurrent_turns_of_one_session_each_store_their_own_body(api_session):
    s = api_session(protocol="unified", version=2)
    s.input("quote ACME")
    for n in range(3):
        s.host_tool_work("lookup", RESULT.format(n=n))
    sent: dict[str, str] = {}
    lock = threading.Lock()
    barrier = threading.Barrier(4)
    errors: list[BaseException] = []

    def turns(provider: str) -> None:
        try:
            barrier.wait()
            for n in range(5):
                built = projection_build(session_id=s.id, provider=provider, use_cache=False)
                with lock:
                    sent[str(built.pk)] = _sent(built)
                if n == 2 and provider == "neutral":
                    message_write(
                        session_id=s.id,
                        message=NewMessage(role="assistant", kind="text", content="halfway"),
                        host=True,
                    )
        except BaseException as exc:
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=turns, args=(p,)) for p in (*PROVIDERS, "neutral")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert not errors, errors
    assert len(sent) == 20
    stored = _assert_all_decode(sent)
    assert sum(1 for s in stored if s.body_encoding == "delta") >= 10


def test_retention_drops_old_bodies_and_the_viewer_rebuilds_them_with_the_hash_check(
    api_session, admin_client, settings
):
    settings.SNAPSHOT_KEYFRAME_INTERVAL = 12
    s = api_session(protocol="unified", version=2)
    sent: dict[str, str] = {}
    s.input("quote ACME")
    for n in range(6):
        s.host_tool_work("lookup", RESULT.format(n=n))
        for provider in PROVIDERS:
            built = projection_build(session_id=s.id, provider=provider, use_cache=False)
            sent[str(built.pk)] = _sent(built)
    ordered = list(ProjectionSnapshot.objects.filter(session_id=s.id).order_by("created_at"))
    assert [x.body_encoding for x in ordered[:3]] == ["key", "delta", "delta"]
    old, kept = ordered[:10], ordered[10:]
    ProjectionSnapshot.objects.filter(pk__in=[x.pk for x in old]).update(
        created_at=timezone.now() - timedelta(days=40)
    )
    settings.SNAPSHOT_BODY_RETENTION_DAYS = 30
    assert body_sweeps.snapshot_body_sweep().dropped == 10
    snapshot_bodies.forget_cache()

    # The rows stay, without their bodies; the kept deltas built on them became keyframes.
    dropped = ProjectionSnapshot.objects.filter(pk__in=[x.pk for x in old])
    assert {(x.body_state, x.body) for x in dropped} == {("dropped", None)}
    assert ProjectionSnapshot.objects.get(pk=kept[0].pk).body_encoding == "key"
    for snapshot in ProjectionSnapshot.objects.filter(pk__in=[x.pk for x in kept]):
        assert snapshot.view.origin == "stored" and _sent(snapshot) == sent[str(snapshot.pk)]

    # A dropped body is rebuilt on read, exactly, and says so.
    snapshot = ProjectionSnapshot.objects.get(pk=old[4].pk)
    assert snapshot.view.rebuilt and snapshot.view.hash_matches is True
    assert _sent(snapshot) == sent[str(snapshot.pk)]
    answer = KeyClient(s.client.key).get(s.path(f"snapshots/{snapshot.pk}/"))
    assert answer.json()["body"] == "rebuilt" and answer.json()["bodyHashMatches"] is True
    stored = KeyClient(s.client.key).get(s.path(f"snapshots/{kept[-1].pk}/")).json()
    assert stored["body"] == "stored" and "bodyHashMatches" not in stored
    page = admin_client.get(
        f"/admin/sessions_app/session/{s.id}/browse/snapshots/{snapshot.pk}/"
    ).content.decode()
    assert 'id="body-rebuilt"' in page and "dropped by retention" in page
    assert "<strong>matches</strong>" in page

    # A recorded hash the rebuild does not reproduce is reported, not hidden.
    ProjectionSnapshot.objects.filter(pk=snapshot.pk).update(request_hash="0" * 64)
    changed = ProjectionSnapshot.objects.get(pk=snapshot.pk)
    assert changed.view.rebuilt and changed.view.hash_matches is False
    page = admin_client.get(
        f"/admin/sessions_app/session/{s.id}/browse/snapshots/{snapshot.pk}/"
    ).content.decode()
    assert "DIFFERS" in page

    # Nothing older than the KV history is dropped: it could not be rebuilt.
    Session.objects.filter(pk=s.id).update(kv_history_from=10**6)
    ProjectionSnapshot.objects.filter(session_id=s.id).update(
        created_at=timezone.now() - timedelta(days=40)
    )
    assert body_sweeps.snapshot_body_sweep().dropped == 0


def test_a_body_not_written_yet_is_rebuilt_at_once_never_waited_for(api_session, monkeypatch):
    s = api_session(protocol="unified", version=2)
    s.input("quote ACME")
    built = projection_build(session_id=s.id, provider="openai-chat")
    text = _sent(built)
    # As a turn leaves it between its two commits (its model call in flight, or its process
    # gone): the row without its body.
    ProjectionSnapshot.objects.filter(pk=built.pk).update(
        body=None, body_encoding="none", body_state="pending"
    )
    snapshot_bodies.forget_cache()

    def no_sleep(seconds: float) -> None:
        raise AssertionError(f"a reader slept {seconds} s")

    monkeypatch.setattr(time, "sleep", no_sleep)
    view = ProjectionSnapshot.objects.get(pk=built.pk).view
    assert view.rebuilt and view.hash_matches is True
    assert body_codec.body_text(view.body) == text
    # Nothing was stored by the reader: the turn's own body is still to come.
    assert ProjectionSnapshot.objects.get(pk=built.pk).body_state == "pending"


def test_a_stored_body_that_does_not_decode_is_rebuilt_not_an_error(api_session):
    s = api_session(protocol="unified", version=2)
    s.input("quote ACME")
    s.host_tool_work("lookup", RESULT.format(n=1))
    built = projection_build(session_id=s.id, provider="openai-chat", use_cache=False)
    ProjectionSnapshot.objects.filter(pk=built.pk).update(body=b"\x05\x00\x00\x00corrupt")
    snapshot_bodies.forget_cache()
    view = ProjectionSnapshot.objects.get(pk=built.pk).view
    assert view.rebuilt and view.hash_matches is True and _sent_view(view) == _sent(built)


def test_a_turn_that_commits_twice_stores_its_body_in_its_second_commit(
    api_session, django_assert_num_queries
):
    """The row in the turn's first transaction, the body encoded with no transaction (as
    during the model call) and stored in a later one, as a delta on the previous body."""
    s = api_session(protocol="unified", version=2)
    s.input("quote ACME")
    s.host_tool_work("lookup", RESULT.format(n=1))
    first = projection_build(session_id=s.id, provider="anthropic-messages")
    s.host_tool_work("lookup", RESULT.format(n=2))
    view = projection_build(session_id=s.id, provider="anthropic-messages", use_cache=False)
    body, fields = view.view.body, _row_fields(view)
    with transaction.atomic():
        row = body_writer.snapshot_row_create(body=body, **fields)
    assert row.view.body is body  # the turn keeps its view in memory
    snapshot_bodies.forget_cache()
    between = ProjectionSnapshot.objects.get(pk=row.pk)
    assert between.body_state == "pending" and between.view.rebuilt
    assert _sent(between) == _sent(view) and between.view.hash_matches is True

    encoded = body_writer.body_encode(row, body)
    assert encoded.encoding == "delta" and encoded.base == view.pk
    with transaction.atomic(), django_assert_num_queries(1):  # one UPDATE in the 2nd commit
        assert body_writer.body_store(encoded)
    assert not body_writer.body_store(encoded)  # once only
    snapshot_bodies.forget_cache()
    stored = ProjectionSnapshot.objects.get(pk=row.pk)
    assert (stored.body_state, stored.body_encoding, stored.body_base) == (
        "stored",
        "delta",
        view.pk,
    )
    assert stored.view.origin == "stored" and _sent(stored) == _sent(view)
    assert stored.body_depth == ProjectionSnapshot.objects.get(pk=view.pk).body_depth + 1
    assert ProjectionSnapshot.objects.get(pk=first.pk).view.origin == "stored"


def test_a_base_dropped_between_encoding_and_storing_makes_the_body_a_keyframe(api_session):
    s = api_session(protocol="unified", version=2)
    s.input("quote ACME")
    s.host_tool_work("lookup", RESULT.format(n=1))
    view = projection_build(session_id=s.id, provider="openai-chat", use_cache=False)
    row = body_writer.snapshot_row_create(body=view.view.body, **_row_fields(view))
    encoded = body_writer.body_encode(row, view.view.body)
    assert encoded.encoding == "delta" and encoded.base == view.pk
    assert body_retention.bodies_drop([view.pk]) == 1
    assert body_writer.body_store(encoded)
    snapshot_bodies.forget_cache()
    stored = ProjectionSnapshot.objects.get(pk=row.pk)
    assert (stored.body_encoding, stored.body_base, stored.body_depth) == ("key", None, 0)
    assert stored.view.origin == "stored" and _sent(stored) == _sent(view)


def test_the_storage_page_sums_each_applications_snapshot_bodies(
    api_session, admin_client, django_assert_max_num_queries
):
    sessions = [api_session(protocol="unified", version=v) for v in (2, 4)]  # two tenants
    for s in sessions:
        s.input("quote ACME")
        for n in range(3):
            s.host_tool_work("lookup", RESULT.format(n=n))
            s.project("anthropic-messages")
    with django_assert_max_num_queries(8):
        page = admin_client.get("/admin/sessions_app/session/snapshot-storage/")
    html = page.content.decode()
    assert page.status_code == 200 and html.count('class="storage-row"') == 2
    stored = sum(x.body_bytes or 0 for x in ProjectionSnapshot.objects.all())
    assert f"{stored:,}" in html
    assert "Snapshot storage" in admin_client.get("/admin/").content.decode()


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_the_migration_keeps_old_bodies_readable_and_later_turns_delta_on_them(api_session):
    """Roll back to before issue 33, store bodies as the old code did, migrate forward."""
    before = [("sessions_app", "0017_host_turns")]
    # Forward to the newest migration, not just 0018: later ones add columns this code writes,
    # and the test database must be left as every other test expects it.
    after = [
        key
        for key in MigrationExecutor(connection).loader.graph.leaf_nodes()
        if key[0] == "sessions_app"
    ]
    s = api_session(protocol="unified", version=2)
    s.input("quote ACME")
    s.host_tool_work("lookup", RESULT.format(n=1))
    sent: dict[str, str] = {}
    for provider in PROVIDERS:
        built = projection_build(session_id=s.id, provider=provider)
        sent[str(built.pk)] = _sent(built)
    ids = list(sent)
    executor = MigrationExecutor(connection)
    try:
        executor.loader.build_graph()
        executor.migrate(before)
        with connection.cursor() as cursor:  # the old column: zlib of the JSON text
            for snapshot_id, text in sent.items():
                cursor.execute(
                    "UPDATE sessions_app_projectionsnapshot SET body = %s WHERE id = %s",
                    [body_codec.legacy_encode(text.encode()), snapshot_id],
                )
    finally:
        executor = MigrationExecutor(connection)
        executor.loader.build_graph()
        executor.migrate(after)
    snapshot_bodies.forget_cache()
    old = list(ProjectionSnapshot.objects.filter(pk__in=ids))
    assert {x.body_encoding for x in old} == {"json"}
    assert all(x.body_bytes and x.body_state == "stored" for x in old)
    for snapshot in old:
        assert _sent(snapshot) == sent[str(snapshot.pk)]
    # The session goes on: a keyframe first (never a delta on an old body, whose token cut
    # is not stored), then deltas on it.
    s.host_tool_work("lookup", RESULT.format(n=2))
    for provider in ("anthropic-messages", "anthropic-messages"):
        built = projection_build(session_id=s.id, provider=provider, use_cache=False)
        sent[str(built.pk)] = _sent(built)
    *_, keyframe, delta = _assert_all_decode(sent)
    assert keyframe.body_encoding == "key" and delta.body_encoding == "delta"
    assert delta.body_base == keyframe.pk
