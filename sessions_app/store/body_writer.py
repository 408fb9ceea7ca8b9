"""Where snapshot bodies are written (issue 33, contract §4.6a): the row, then its body.

The turn commits the snapshot row with what fencing and provenance need (R, U, run, window,
protocol, build inputs) and the SHA-256 of its request (`snapshot_create`). The body is then
written by `body_write`, as a delta against the session's newest earlier body or as a
keyframe (store/body_codec.py): by default right after the row's commit, by a thread of the
same process (`SNAPSHOT_BODY_WRITE=deferred`), so the encoding and the write are off the
turn's path; inside a caller's transaction (no other connection could see the row before it
commits anyway) and with `inline`, in the call itself; with `full`, the whole body goes into
the row as before issue 33. A process that dies between the two writes leaves the row
`pending`: the sweeper (`maintenance/snapshot_sweeps.py`) rebuilds the body from the state
at R and the log through U and marks it `rebuilt`.

Concurrency. A delta's base is read FOR SHARE while the delta is written, and retention
(store/body_retention.py) locks a body FOR UPDATE before it re-encodes the deltas built on it
as keyframes and drops it, so no delta is ever left without its base.
"""

from __future__ import annotations

import atexit
import logging
import os
import queue
import threading
import time
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from django.conf import settings
from django.db import connection, transaction

from sessions_app.models import ProjectionSnapshot
from sessions_app.store import body_codec
from sessions_app.store.snapshot_bodies import (
    TABLE,
    Encoding,
    State,
    as_uuid,
    db_uuid,
    pending,
    pending_lock,
    request_hash,
    token_cache,
    tokens_of,
)
from sessions_app.store.snapshot_view import SnapshotView

logger = logging.getLogger(__name__)

# A delta smaller than 1/this of the view's JSON is taken as smaller than its keyframe
# without encoding the keyframe (off the turn's path, but the writer's biggest cost).
KEYFRAME_RATIO_BOUND = 100

# The base of a new body: the session's newest earlier snapshot with a body, shared-locked
# so retention cannot drop it before the delta that needs it is committed. Only bodies
# whose token cut is stored (keyframes, deltas) are bases: a delta on a body stored before
# issue 33 would depend on how this code cuts it, and a later version may cut otherwise.
_BASE_SQL = """
SELECT id, body_depth, body_encoding FROM {table}
WHERE session_id = %s AND body_state IN ('stored', 'rebuilt') AND body IS NOT NULL
  AND (created_at < %s OR (created_at = %s AND id < %s))
ORDER BY created_at DESC, id DESC
LIMIT 1{lock}
"""


# --------------------------------------------------------------------------- writing


@dataclass(frozen=True)
class Encoded:
    encoding: str
    data: bytes
    base: UUID | None
    depth: int
    tokens: list[str]
    view_bytes: int


def _encode(
    session_id: Any, created_at: datetime, snapshot_id: Any, body: dict[str, Any]
) -> Encoded:
    """The body as a delta against the session's newest earlier body, or a keyframe: every
    SNAPSHOT_KEYFRAME_INTERVAL bodies, and whenever the delta is not smaller. Run inside the
    transaction that writes it (the base is shared-locked until then)."""
    text = body_codec.body_text(body)
    tokens = body_codec.tokenize(body)
    size = len(text.encode())
    lock = " FOR SHARE" if connection.vendor == "postgresql" else ""
    with connection.cursor() as cursor:
        cursor.execute(
            _BASE_SQL.format(table=TABLE, lock=lock),
            [db_uuid(session_id), created_at, created_at, db_uuid(snapshot_id)],
        )
        found = cursor.fetchone()
    if (
        found is not None
        and found[2] in (Encoding.KEY, Encoding.DELTA)
        and found[1] + 1 < settings.SNAPSHOT_KEYFRAME_INTERVAL
    ):
        base = as_uuid(found[0])
        try:
            base_tokens = tokens_of(base, {})
        except body_codec.CodecError:
            logger.exception("snapshot body %s does not decode; writing a keyframe", base)
        else:
            delta = body_codec.encode_delta(base_tokens, tokens)
            # The keyframe is encoded to compare only when the delta is not tiny: no view's
            # JSON deflates 100:1 (bench: 7:1 to 41:1), so a smaller delta is smaller.
            if len(delta) * KEYFRAME_RATIO_BOUND < size or len(delta) < len(
                key := body_codec.encode_key(tokens)
            ):
                return Encoded(Encoding.DELTA, delta, base, found[1] + 1, tokens, size)
            return Encoded(Encoding.KEY, key, None, 0, tokens, size)
    return Encoded(Encoding.KEY, body_codec.encode_key(tokens), None, 0, tokens, size)


def body_write(
    *,
    snapshot_id: Any,
    session_id: Any,
    created_at: datetime,
    body: dict[str, Any],
    state: str = State.STORED,
    note: str | None = None,
) -> bool:
    """Write a pending snapshot's body; False if it was no longer pending (another writer,
    the sweeper or a rebuild, came first). `note` is added to the snapshot's notes."""
    snapshot_id = as_uuid(snapshot_id)
    with transaction.atomic():
        encoded = _encode(session_id, created_at, snapshot_id, body)
        fields: dict[str, Any] = {
            "body": encoded.data,
            "body_encoding": encoded.encoding,
            "body_base": encoded.base,
            "body_depth": encoded.depth,
            "body_state": state,
            "body_bytes": len(encoded.data),
            "view_bytes": encoded.view_bytes,
        }
        rows = ProjectionSnapshot.objects.filter(pk=snapshot_id, body_state=State.PENDING)
        if note is not None:
            found = rows.select_for_update().values_list("notes", flat=True).first()
            if found is None:
                return False
            fields["notes"] = [*(found or []), note]
        written = rows.update(**fields) == 1
    if written:
        token_cache.put(snapshot_id, encoded.tokens)
    return written


def snapshot_create(*, body: dict[str, Any], **fields: Any) -> ProjectionSnapshot:
    """Insert a turn's snapshot row and see that its body gets written (the module docstring
    says when); the returned instance carries its view in memory either way."""
    request = body.get("request")
    digest = request_hash(request) if request is not None else ""
    mode = settings.SNAPSHOT_BODY_WRITE
    if mode == "full":
        data = body_codec.body_text(body).encode()
        packed = body_codec.legacy_encode(data)
        snapshot = ProjectionSnapshot.objects.create(
            **fields,
            body=packed,
            body_encoding=Encoding.JSON,
            body_state=State.STORED,
            body_bytes=len(packed),
            view_bytes=len(data),
            request_hash=digest,
        )
        snapshot.attach_view(SnapshotView(body=body))
        return snapshot
    snapshot = ProjectionSnapshot.objects.create(
        **fields,
        body=None,
        body_encoding=Encoding.NONE,
        body_state=State.PENDING,
        request_hash=digest,
    )
    snapshot.attach_view(SnapshotView(body=body))
    item = _Item(snapshot.pk, snapshot.session_id, snapshot.created_at, body)
    if mode == "inline" or connection.in_atomic_block:
        _write(item)
    else:
        with pending_lock:
            pending[snapshot.pk] = body
        _writer.submit(item)
    return snapshot


# --------------------------------------------------------------------------- the writer


@dataclass(frozen=True)
class _Item:
    snapshot_id: UUID
    session_id: UUID
    created_at: datetime
    body: dict[str, Any]


def _write(item: _Item) -> None:
    body_write(
        snapshot_id=item.snapshot_id,
        session_id=item.session_id,
        created_at=item.created_at,
        body=item.body,
    )


class _Writer:
    """This process's thread that writes bodies after their rows committed, in order."""

    def __init__(self) -> None:
        self.queue: queue.Queue[_Item] = queue.Queue()
        self.lock = threading.Lock()
        self.thread: threading.Thread | None = None
        self.pid = 0

    def submit(self, item: _Item) -> None:
        with self.lock:
            if self.thread is None or self.pid != os.getpid() or not self.thread.is_alive():
                if self.pid != os.getpid():
                    self.queue = queue.Queue()  # a forked child: not its parent's queue
                self.pid = os.getpid()
                self.thread = threading.Thread(
                    target=self._run, name="snapshot-bodies", daemon=True
                )
                self.thread.start()
            self.queue.put(item)

    def _run(self) -> None:
        work = self.queue
        while True:
            item = work.get()
            try:
                _write(item)
            except Exception:
                # The row stays pending: readers rebuild it, the sweeper writes it rebuilt.
                logger.exception("snapshot %s: body not written", item.snapshot_id)
            finally:
                with pending_lock:
                    pending.pop(item.snapshot_id, None)
                work.task_done()
                if work.empty():
                    connection.close()  # this thread's own connection, until more work comes

    def flush(self, timeout: float = 30.0) -> bool:
        """Wait until every body submitted so far is written; False on timeout."""
        deadline = time.monotonic() + timeout
        while self.queue.unfinished_tasks:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.005)
        return True


_writer = _Writer()


def bodies_flush(timeout: float = 30.0) -> bool:
    """Wait for this process's deferred body writes (tests, benches, shutdown)."""
    return _writer.flush(timeout)


def pending_bodies() -> int:
    """Bodies this process has still to write."""
    with pending_lock:
        return len(pending)


atexit.register(bodies_flush, 10.0)
