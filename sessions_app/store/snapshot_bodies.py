"""Where snapshot bodies are written and the one decoder every reader reads them through
(issue 33, contract §4.6a).

Writing. The turn commits the snapshot row with what fencing and provenance need (R, U, run,
window, protocol, build inputs) and the SHA-256 of its request (`snapshot_create`). The body
is then written by `body_write`, as a delta against the session's newest earlier body or as a
keyframe (store/body_codec.py): by default right after the row's commit, by a thread of the
same process (`SNAPSHOT_BODY_WRITE=deferred`), so the encoding and the write are off the
turn's path; inside a caller's transaction (no other connection could see the row before it
commits anyway) and with `inline`, in the call itself; with `full`, the whole body goes into
the row as before issue 33. A process that dies between the two writes leaves the row
`pending`: the sweeper (`maintenance/snapshot_sweeps.py`) rebuilds the body from the state
at R and the log through U and marks it `rebuilt`.

Reading. `view_of` / `views_of` decode a body (following its delta chain: one statement for
any number of snapshots) or, for a body not written yet, wait for it (this process's own
pending bodies are answered from memory at once) and rebuild it once the grace period is
over; a body dropped by retention is rebuilt. Nothing is ever served as an empty view.

Concurrency. A delta's base is read FOR SHARE while the delta is written, and retention
locks a body FOR UPDATE before it re-encodes the deltas built on it as keyframes and drops it,
so no delta is ever left without its base. Bodies never change once written (re-encoding
keeps the decoded body), so a decoded body may be cached by id (`_TokenCache`).
"""

from __future__ import annotations

import atexit
import hashlib
import json
import logging
import os
import queue
import threading
import time
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from django.conf import settings
from django.db import connection, models, transaction

from sessions_app.models import ProjectionSnapshot
from sessions_app.store import body_codec, hooks
from sessions_app.store.snapshot_view import REBUILT, SnapshotView

logger = logging.getLogger(__name__)

State = ProjectionSnapshot.BodyState
Encoding = ProjectionSnapshot.BodyEncoding
TABLE = ProjectionSnapshot._meta.db_table
_UUID = models.UUIDField()
_NO_ID = UUID(int=0)

# How often a reader looks again for a body another process is still writing.
POLL_SECONDS = 0.02
# A delta smaller than 1/this of the view's JSON is taken as smaller than its keyframe
# without encoding the keyframe (off the turn's path, but the writer's biggest cost).
KEYFRAME_RATIO_BOUND = 100

# The rows a set of snapshots' bodies decode from: each one and, for a delta, its base,
# recursively, stopping at keyframes and at bodies already decoded here (`known`).
_CHAIN_SQL = """
WITH RECURSIVE chain(id) AS (
    SELECT id FROM {table} WHERE id IN ({targets})
    UNION
    SELECT s.body_base FROM {table} s JOIN chain c ON s.id = c.id
    WHERE s.body_encoding = 'delta' AND s.body_base IS NOT NULL AND s.id NOT IN ({known})
)
SELECT t.id, t.body_base, t.body_encoding, t.body, t.body_state
FROM chain JOIN {table} t ON t.id = chain.id
"""

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


def request_hash(request: Any) -> str:
    """SHA-256 of the request's JSON text as stored (contract §4.6a `bodyHashMatches`)."""
    return hashlib.sha256(body_codec.body_text(request).encode()).hexdigest()


def _db_uuid(value: Any) -> Any:
    return _UUID.get_db_prep_value(value, connection)


def _as_uuid(value: Any) -> UUID:
    return value if isinstance(value, UUID) else UUID(str(value))


def _bytes(value: Any) -> bytes:
    return bytes(value) if value is not None else b""


# --------------------------------------------------------------------------- the cache


class _TokenCache:
    """Decoded bodies (as tokens) by snapshot id, the most recent few: a delta's base is
    usually the body this process wrote or read last."""

    def __init__(self, size: int = 48) -> None:
        self.size = size
        self.lock = threading.Lock()
        self.items: OrderedDict[UUID, list[str]] = OrderedDict()

    def get(self, key: UUID) -> list[str] | None:
        with self.lock:
            found = self.items.get(key)
            if found is not None:
                self.items.move_to_end(key)
            return found

    def put(self, key: UUID, tokens: list[str]) -> None:
        with self.lock:
            self.items[key] = tokens
            self.items.move_to_end(key)
            while len(self.items) > self.size:
                self.items.popitem(last=False)

    def known(self) -> list[UUID]:
        with self.lock:
            return list(self.items)

    def clear(self) -> None:
        with self.lock:
            self.items.clear()


_tokens = _TokenCache()
# Bodies this process committed a row for and has not written yet, by snapshot id.
_pending: dict[UUID, dict[str, Any]] = {}
_pending_lock = threading.Lock()


# --------------------------------------------------------------------------- decoding


@dataclass(frozen=True)
class _Row:
    id: UUID
    base: UUID | None
    encoding: str
    data: bytes
    state: str


def _chain_rows(ids: Sequence[UUID]) -> dict[UUID, _Row]:
    """The rows `ids` decode from, in one statement."""
    if not ids:
        return {}
    known = _tokens.known() or [_NO_ID]  # (an empty IN () is not SQL)
    sql = _CHAIN_SQL.format(
        table=TABLE,
        targets=", ".join(["%s"] * len(ids)),
        known=", ".join(["%s"] * len(known)),
    )
    params = [_db_uuid(i) for i in ids] + [_db_uuid(k) for k in known]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    found = {}
    for row_id, base, encoding, data, state in rows:
        row = _Row(
            _as_uuid(row_id),
            _as_uuid(base) if base is not None else None,
            encoding,
            _bytes(data),
            state,
        )
        found[row.id] = row
    return found


def _tokens_of(snapshot_id: UUID, rows: dict[UUID, _Row]) -> list[str]:
    """A written body's tokens (the base of a delta, or a delta itself)."""
    chain: list[_Row] = []
    at: UUID | None = snapshot_id
    tokens: list[str] | None = None
    while at is not None:
        tokens = _tokens.get(at)
        if tokens is not None:
            break
        row = rows.get(at)
        if row is None:
            rows.update(_chain_rows([at]))
            row = rows.get(at)
        if row is None or not row.data:
            raise body_codec.CodecError(f"snapshot {at} has no stored body to decode from")
        chain.append(row)
        if row.encoding != Encoding.DELTA:
            break
        at = row.base
    for row in reversed(chain):
        if row.encoding == Encoding.DELTA:
            assert tokens is not None
            tokens = body_codec.decode_delta(tokens, row.data)
        elif row.encoding == Encoding.KEY:
            tokens = body_codec.decode_key(row.data)
        else:
            tokens = body_codec.tokenize(json.loads(body_codec.legacy_text(row.data)))
        _tokens.put(row.id, tokens)
    assert tokens is not None
    return tokens


def _body(snapshot_id: UUID, rows: dict[UUID, _Row]) -> dict[str, Any]:
    """A written body as the turn built it ({} for a row made without one: usage-only rows)."""
    cached = _tokens.get(snapshot_id)
    if cached is not None:
        text = body_codec.join(cached)
    else:
        row = rows.get(snapshot_id)
        if row is None:
            rows.update(_chain_rows([snapshot_id]))
            row = rows.get(snapshot_id)
        if row is None or not row.data:
            return {}
        if row.encoding == Encoding.JSON:
            text = body_codec.legacy_text(row.data)
        elif row.encoding == Encoding.KEY:
            text = body_codec.key_text(row.data)
        else:
            text = body_codec.join(_tokens_of(row.id, rows))
    body = json.loads(text)
    return body if isinstance(body, dict) else {}


def _wait_for(snapshot: ProjectionSnapshot) -> dict[UUID, _Row] | None:
    """Wait for a body another process is writing: the rows it decodes from once written;
    None once the grace period is over (its writer died) or when it is this process's own."""
    deadline = snapshot.created_at.timestamp() + settings.SNAPSHOT_BODY_GRACE_SECONDS
    while True:
        with _pending_lock:
            if snapshot.pk in _pending:
                return None
        rows = _chain_rows([snapshot.pk])
        row = rows.get(snapshot.pk)
        if row is None or row.state != State.PENDING:
            return rows
        # A caller inside a transaction (holding its locks) is not kept waiting: it gets the
        # rebuild at once.
        if time.time() >= deadline or connection.in_atomic_block:
            return None
        time.sleep(POLL_SECONDS)


def _whole(snapshot: ProjectionSnapshot) -> SnapshotView | None:
    """The view of a body stored whole that was loaded with its row: no further read."""
    loaded = snapshot.__dict__
    if "body" not in loaded or "body_encoding" not in loaded or "body_state" not in loaded:
        return None
    if snapshot.body_state != State.STORED or snapshot.body is None:
        return None
    if snapshot.body_encoding == Encoding.JSON:
        text = body_codec.legacy_text(_bytes(snapshot.body))
    elif snapshot.body_encoding == Encoding.KEY:
        text = body_codec.key_text(_bytes(snapshot.body))
    else:
        return None
    body = json.loads(text)
    return SnapshotView(body=body if isinstance(body, dict) else {})


def views_of(snapshots: Iterable[ProjectionSnapshot]) -> None:
    """Attach its view to every snapshot that has none yet, reading the rows of all their
    bodies in one statement (none when each was loaded with a whole body)."""
    todo = []
    for snapshot in snapshots:
        if "_view" in snapshot.__dict__:
            continue
        whole = _whole(snapshot)
        if whole is not None:
            snapshot.attach_view(whole)
        else:
            todo.append(snapshot)
    if not todo:
        return
    rows = _chain_rows([s.pk for s in todo if _tokens.get(s.pk) is None])
    for snapshot in todo:
        snapshot.attach_view(_view(snapshot, rows))


def view_of(snapshot: ProjectionSnapshot) -> SnapshotView:
    """The snapshot's view (installed as `hooks.snapshot_view`, read by `snapshot.view`)."""
    whole = _whole(snapshot)
    if whole is not None:
        return whole
    rows = {} if _tokens.get(snapshot.pk) is not None else _chain_rows([snapshot.pk])
    return _view(snapshot, rows)


def _view(snapshot: ProjectionSnapshot, rows: dict[UUID, _Row]) -> SnapshotView:
    with _pending_lock:
        mine = _pending.get(snapshot.pk)
    if mine is not None:
        return SnapshotView(body=mine)
    row = rows.get(snapshot.pk)
    state = row.state if row is not None else snapshot.body_state
    if state == State.PENDING:
        written = _wait_for(snapshot)
        with _pending_lock:
            mine = _pending.get(snapshot.pk)
        if mine is not None:
            return SnapshotView(body=mine)
        if written is None:
            return _rebuild(snapshot)
        rows = {**rows, **written}
        row = rows.get(snapshot.pk)
        state = row.state if row is not None else State.PENDING
        if state == State.PENDING:
            return _rebuild(snapshot)
    if state == State.DROPPED:
        return _rebuild(snapshot)
    body = _body(snapshot.pk, rows)
    if state == State.REBUILT:
        matches = (
            request_hash(body.get("request")) == snapshot.request_hash
            if snapshot.request_hash
            else None
        )
        return SnapshotView(body=body, origin=REBUILT, hash_matches=matches)
    return SnapshotView(body=body)


def _rebuild(snapshot: ProjectionSnapshot) -> SnapshotView:
    view: SnapshotView = hooks.snapshot_rebuild(snapshot)
    return view


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
            [_db_uuid(session_id), created_at, created_at, _db_uuid(snapshot_id)],
        )
        found = cursor.fetchone()
    if (
        found is not None
        and found[2] in (Encoding.KEY, Encoding.DELTA)
        and found[1] + 1 < settings.SNAPSHOT_KEYFRAME_INTERVAL
    ):
        base = _as_uuid(found[0])
        try:
            base_tokens = _tokens_of(base, {})
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
    snapshot_id = _as_uuid(snapshot_id)
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
        _tokens.put(snapshot_id, encoded.tokens)
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
        with _pending_lock:
            _pending[snapshot.pk] = body
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
                with _pending_lock:
                    _pending.pop(item.snapshot_id, None)
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
    with _pending_lock:
        return len(_pending)


def forget_cache() -> None:
    """Drop the decoded bodies this process keeps (tests and benches that time cold reads)."""
    _tokens.clear()


atexit.register(bodies_flush, 10.0)


# --------------------------------------------------------------------------- retention


def bodies_drop(snapshot_ids: Sequence[Any]) -> int:
    """Drop these snapshots' bodies, keeping their rows; return how many were dropped.

    Locks the rows FOR UPDATE, then stores every kept delta built on one of them as a
    keyframe (its decoded body does not change), then drops: no delta is left without its
    base, and a writer choosing one of them as a base waits for the lock and then sees it
    gone. Bodies already dropped or not written are left alone.
    """
    ids = [_as_uuid(i) for i in snapshot_ids]
    if not ids:
        return 0
    with transaction.atomic():
        locked = list(
            ProjectionSnapshot.objects.filter(
                pk__in=ids, body_state__in=[State.STORED, State.REBUILT]
            )
            .order_by("pk")
            .select_for_update()
            .values_list("pk", flat=True)
        )
        if not locked:
            return 0
        dependents = list(
            ProjectionSnapshot.objects.filter(body_base__in=locked, body_encoding=Encoding.DELTA)
            .exclude(pk__in=locked)
            .order_by("pk")
            .select_for_update()
            .values_list("pk", flat=True)
        )
        for dependent in dependents:
            tokens = _tokens_of(dependent, {})
            key = body_codec.encode_key(tokens)
            ProjectionSnapshot.objects.filter(pk=dependent).update(
                body=key,
                body_encoding=Encoding.KEY,
                body_base=None,
                body_depth=0,
                body_bytes=len(key),
            )
        return ProjectionSnapshot.objects.filter(pk__in=locked).update(
            body=None,
            body_encoding=Encoding.NONE,
            body_base=None,
            body_depth=0,
            body_state=State.DROPPED,
            body_bytes=0,
        )


def lost_bodies(older_than: datetime, limit: int = 200) -> list[ProjectionSnapshot]:
    """Snapshots whose body was still not written at `older_than` (their process died)."""
    return list(
        ProjectionSnapshot.objects.filter(
            body_state=State.PENDING, created_at__lt=older_than
        ).order_by("created_at")[:limit]
    )


def expired_bodies(older_than: datetime, limit: int = 500) -> list[UUID]:
    """Snapshots with a body from before `older_than` that the state at R can rebuild."""
    return list(
        ProjectionSnapshot.objects.filter(
            body_state__in=[State.STORED, State.REBUILT],
            created_at__lt=older_than,
            revision__gte=models.F("session__kv_history_from"),
        )
        .order_by("created_at")
        .values_list("pk", flat=True)[:limit]
    )


def body_mark_lost(snapshot_id: Any, note: str) -> bool:
    """A body that was never written and cannot be rebuilt: say so on the snapshot."""
    with transaction.atomic():
        rows = ProjectionSnapshot.objects.filter(pk=snapshot_id, body_state=State.PENDING)
        found = rows.select_for_update().values_list("notes", flat=True).first()
        if found is None:
            return False
        return rows.update(body_state=State.DROPPED, notes=[*(found or []), note]) == 1
