"""Forks taken while the original is written to, archived and dispatched on (PostgreSQL).

The fork holds no lock on the original: it reads an immutable prefix of the log and of the
KV history. Neither session may come out corrupted: each fork equals the original at its
point, and the original's log and state stay whole.
"""

from __future__ import annotations

import threading

import pytest
from django.db import connection

from sessions_app.models import KVEntry, Session
from sessions_app.reads.history import kv_at
from sessions_app.services.archive import archive_session
from sessions_app.services.fork import session_fork
from sessions_app.services.messages import NewMessage, message_write
from sessions_app.services.projection import projection_build
from sessions_app.store.state import kv_commit
from tests.sessions_app.test_fork import assert_copy, fork_kv, log, state_at

pytestmark = [pytest.mark.postgres]


@pytest.mark.django_db(transaction=True)
def test_writes_to_the_original_during_forks_corrupt_neither(api_session):
    s = api_session(version=2)
    s.input("start")
    for n in range(20):
        s.host_tool_work("lookup", f"row {n} " * 20)
    early = s.project()
    session_id = s.id
    barrier = threading.Barrier(2)
    errors: list[BaseException] = []
    forks: list[tuple[Session, str]] = []
    written = threading.Event()

    def writer() -> None:
        try:
            barrier.wait()
            for n in range(25):
                view = projection_build(session_id=session_id)
                message_write(
                    session_id=session_id,
                    message=NewMessage(
                        role="assistant",
                        kind="tool_call",
                        content="",
                        tool_call_id=f"w{n}",
                        tool_name="lookup",
                        arguments={"n": n},
                        snapshot_id=str(view.id),
                    ),
                    host=True,
                )
                message_write(
                    session_id=session_id,
                    message=NewMessage(
                        role="tool", kind="tool_result", content=f"result {n}", tool_call_id=f"w{n}"
                    ),
                    host=True,
                )
                kv_commit(session_id=session_id, writes={"taskMemory": f"step {n}"})
                if n % 6 == 5:
                    archive_session(session_id=session_id, keep_last=6, chunk_size=5)
        except BaseException as exc:
            errors.append(exc)
        finally:
            written.set()
            connection.close()

    def forker() -> None:
        try:
            barrier.wait()
            n = 0
            while not written.is_set() and n < 40:
                n += 1
                original = Session.objects.select_related("agent_version").get(pk=session_id)
                if n % 2:
                    forks.append(session_fork(session=original, snapshot_id=early["snapshotId"]))
                else:
                    forks.append(session_fork(session=original, through_index=original.last_index))
        except BaseException as exc:
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=writer), threading.Thread(target=forker)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    assert not errors, errors
    # Forks were taken at several points while the writer went on.
    points = {(f.forked_through_index, f.forked_revision) for f, _key in forks}
    assert len(points) > 2, points

    # The original: a gapless log ending where its counter says, its KV its latest history.
    original = Session.objects.get(pk=session_id)
    assert [m.index for m in log(session_id)] == list(range(1, original.last_index + 1))
    current = dict(KVEntry.objects.filter(session_id=session_id).values_list("key", "value"))
    assert kv_at(session_id, original.state_revision) == current
    assert current["taskMemory"] == "step 24"
    # Each fork: the original's log through its bound and its state at its revision.
    for fork, key in forks:
        body = {
            "id": str(fork.pk),
            "sessionKey": key,
            "lastIndex": fork.last_index,
            "stateRevision": fork.state_revision,
            "forkedFrom": {
                "sessionId": session_id,
                "throughIndex": fork.forked_through_index,
                "revision": fork.forked_revision,
            },
        }
        assert_copy(session_id, body)
        assert fork_kv(body) == state_at(s, fork.forked_revision)
