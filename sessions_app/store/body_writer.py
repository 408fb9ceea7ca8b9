"""The one write path of snapshot bodies (issues 33 and 42, contract §4.6a).

A snapshot is a row and a body. The row holds what fencing and provenance need (R, U, run,
window, protocol, options, build inputs, notes) and the SHA-256 of the request it was built
with; the body is the view (`{"messages", "sources", "request"}`) as a delta against the
session's newest stored body, or whole (a keyframe; store/body_codec.py). Both are written by
the caller's own transactions, in one of two ways:

* `snapshot_create(body=..., **fields)`: one call, for a caller with one transaction
  (`projection_build`: `POST …/projection/`, host `turns/`): the base share-locked, the body
  encoded on it, row and body inserted together.
* A turn that commits before and after its model call: `snapshot_row_create` in the first
  transaction (the row, no body), `body_encode` with no transaction (while the model call is
  in flight: it reads only bodies already written, which never change), `body_store` in the
  second (one UPDATE, which share-locks the base).

A row left without a body — its turn is still waiting for its model, or its process died
between the two commits — is rebuilt by every reader from the state at R and the log through
U (store/snapshot_bodies.py); the body sweep (maintenance/body_sweeps.py) writes that rebuild
once SNAPSHOT_BODY_GRACE_SECONDS have passed. No thread, no queue, nothing waits.

Concurrency. The base is share-locked while the delta built on it is written, and retention
(store/body_retention.py) locks a body FOR UPDATE before it re-encodes the deltas built on it
as keyframes and drops it: no delta is ever left without its base, and a base dropped between
the encoding and the store makes the store write a keyframe instead.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from django.conf import settings
from django.db import connection, transaction

from sessions_app.models import ProjectionSnapshot
from sessions_app.store import body_codec, snapshot_bodies
from sessions_app.store.snapshot_bodies import TABLE, Encoding, State, as_uuid, db_uuid
from sessions_app.store.snapshot_view import SnapshotView

logger = logging.getLogger(__name__)

# A delta smaller than 1/this of the view's JSON is taken as smaller than its keyframe
# without encoding the keyframe: no view's JSON deflates 100:1 (bench: 7:1 to 41:1).
KEYFRAME_RATIO_BOUND = 100

# The base of a new body: the session's newest body whose token cut is stored (keyframes and
# deltas; a body stored before issue 33 is cut by whatever this code does on decoding).
_BASE_SQL = f"""
SELECT id, body_depth FROM {TABLE}
WHERE session_id = %s AND body_state IN ('stored', 'rebuilt') AND body_encoding IN ('key', 'delta')
ORDER BY created_at DESC
LIMIT 1
"""
# The same base again, share-locked by the transaction that stores a delta built on it, so
# retention cannot drop it before that commits; no row: it was dropped meanwhile.
_BASE_LOCK_SQL = f"""
SELECT body_depth FROM {TABLE}
WHERE id = %s AND body_state IN ('stored', 'rebuilt') AND body_encoding IN ('key', 'delta')
"""
# A delta into its pending row, its base share-locked, in one statement (an UPDATE, whose row
# count every driver reports): no row updated when the row has its body already or the base
# was dropped ({lock}: FOR SHARE on PostgreSQL).
_STORE_DELTA_SQL = f"""
UPDATE {TABLE} SET body = %s, body_encoding = 'delta', body_base = %s,
    body_depth = (SELECT b.body_depth + 1 FROM {TABLE} b WHERE b.id = %s),
    body_state = %s, body_bytes = %s, view_bytes = %s
WHERE id = %s AND body_state = 'pending' AND EXISTS (
    SELECT 1 FROM {TABLE} b
    WHERE b.id = %s AND b.body_state IN ('stored', 'rebuilt')
      AND b.body_encoding IN ('key', 'delta')
    {{lock}}
)
"""


@dataclass(frozen=True, eq=False)
class BodyBase:
    """The stored body a new one is encoded against, and its tokens."""

    id: UUID
    depth: int  # deltas between it and its keyframe
    tokens: list[str]


@dataclass(frozen=True, eq=False)
class EncodedBody:
    """A body ready to store: what `body_encode` computed, what `body_store` writes."""

    snapshot_id: UUID
    encoding: str  # Encoding.KEY or Encoding.DELTA
    data: bytes
    base: UUID | None  # a delta's base
    view_bytes: int  # of the body's JSON text
    tokens: list[str]  # its token cut: a keyframe if the base is gone, the next body's base


# --------------------------------------------------------------------------- encoding


def body_base(session_id: Any, *, lock: bool = False) -> BodyBase | None:
    """The session's newest stored body, decoded (or as this process keeps it), if the next
    body may be a delta on it; None when it must be a keyframe (none yet, or a keyframe is
    due every SNAPSHOT_KEYFRAME_INTERVAL bodies). Reads only bodies already written; `lock`
    share-locks the base's row until the caller's transaction ends."""
    sql = _BASE_SQL + (" FOR SHARE" if lock and connection.vendor == "postgresql" else "")
    with connection.cursor() as cursor:
        cursor.execute(sql, [db_uuid(session_id)])
        found = cursor.fetchone()
    if found is None or found[1] + 1 >= settings.SNAPSHOT_KEYFRAME_INTERVAL:
        return None
    base = as_uuid(found[0])
    try:
        tokens = snapshot_bodies.tokens_of(base)
    except body_codec.CodecError:
        # Dropped since the read above, or corrupt: a keyframe does without it.
        logger.warning("snapshot body %s does not decode; the next body is a keyframe", base)
        return None
    return BodyBase(id=base, depth=found[1], tokens=tokens)


def _encoded(base: BodyBase | None, snapshot_id: UUID, text: str) -> EncodedBody:
    tokens = body_codec.cut(text)
    size = len(text.encode())
    if base is not None:
        delta = body_codec.encode_delta(base.tokens, tokens)
        # The keyframe is encoded to compare only when the delta is not tiny.
        if len(delta) * KEYFRAME_RATIO_BOUND < size or len(delta) < len(
            key := body_codec.encode_key(tokens)
        ):
            return EncodedBody(snapshot_id, Encoding.DELTA, delta, base.id, size, tokens)
        return EncodedBody(snapshot_id, Encoding.KEY, key, None, size, tokens)
    return EncodedBody(snapshot_id, Encoding.KEY, body_codec.encode_key(tokens), None, size, tokens)


def body_encode_on(
    base: BodyBase | None, snapshot: ProjectionSnapshot, body: dict[str, Any]
) -> EncodedBody:
    """Encode `body` as a delta on `base`, or a keyframe when there is none or the delta is
    not smaller. Pure computation: no database."""
    return _encoded(base, snapshot.pk, body_codec.body_text(body))


def body_encode(snapshot: ProjectionSnapshot, body: dict[str, Any]) -> EncodedBody:
    """Encode a snapshot's body against the session's newest stored body; needs no
    transaction and takes no lock (it reads bodies already written, which never change), so
    it can run while the turn's model call is in flight. The snapshot's row need not be
    written yet. In a thread of its own it opens that thread's database connection (unless
    the base is decoded here already): call `body_base` first and `body_encode_on` in the
    thread to keep it off the database entirely."""
    return body_encode_on(body_base(snapshot.session_id), snapshot, body)


@dataclass(eq=False)
class PendingBody:
    """A turn's snapshot body, written in the turn's second commit: `base` read in the request's
    thread, the body encoded on it while the model call is in flight (`encode`: no database,
    so any thread may run it), then stored with the turn's answer (`body_store`)."""

    base: BodyBase | None
    snapshot: ProjectionSnapshot
    encoded: EncodedBody | None = None

    def encode(self) -> EncodedBody:
        if self.encoded is None:
            self.encoded = body_encode_on(self.base, self.snapshot, self.snapshot.view.body)
        return self.encoded


def body_pending(snapshot: ProjectionSnapshot) -> PendingBody:
    """The body of `snapshot` (its row written by `snapshot_row_create`), to encode and store
    later: its base read now (one statement)."""
    return PendingBody(body_base(snapshot.session_id), snapshot)


# --------------------------------------------------------------------------- storing


def _locked(encoded: EncodedBody) -> tuple[EncodedBody, int]:
    """The body as it can be stored now, and its depth: its base share-locked until the
    caller's transaction ends, or, if that base was dropped meanwhile, a keyframe."""
    if encoded.base is None:
        return encoded, 0
    lock = " FOR SHARE" if connection.vendor == "postgresql" else ""
    with connection.cursor() as cursor:
        cursor.execute(_BASE_LOCK_SQL + lock, [db_uuid(encoded.base)])
        found = cursor.fetchone()
    if found is not None:
        return encoded, found[0] + 1
    key = body_codec.encode_key(encoded.tokens)
    logger.info("snapshot %s: its base was dropped; storing a keyframe", encoded.snapshot_id)
    keyframe = EncodedBody(
        encoded.snapshot_id, Encoding.KEY, key, None, encoded.view_bytes, encoded.tokens
    )
    return keyframe, 0


def _columns(encoded: EncodedBody, depth: int, state: str) -> dict[str, Any]:
    return {
        "body": encoded.data,
        "body_encoding": encoded.encoding,
        "body_base": encoded.base,
        "body_depth": depth,
        "body_state": state,
        "body_bytes": len(encoded.data),
        "view_bytes": encoded.view_bytes,
    }


def _remember_on_commit(encoded: EncodedBody) -> None:
    # After the commit only: a row whose body store rolled back may later receive another body
    # (the sweeper's rebuild), and these tokens must not stand for it.
    transaction.on_commit(lambda: snapshot_bodies.remember(encoded.snapshot_id, encoded.tokens))


def _store_delta(encoded: EncodedBody, state: str) -> bool:
    """The one-statement store of a delta (the turn's usual case)."""
    lock = " FOR SHARE" if connection.vendor == "postgresql" else ""
    with connection.cursor() as cursor:
        cursor.execute(
            _STORE_DELTA_SQL.format(lock=lock),
            [
                encoded.data,
                db_uuid(encoded.base),
                db_uuid(encoded.base),
                state,
                len(encoded.data),
                encoded.view_bytes,
                db_uuid(encoded.snapshot_id),
                db_uuid(encoded.base),
            ],
        )
        return cursor.rowcount == 1


def body_store(encoded: EncodedBody, *, state: str = State.STORED, note: str | None = None) -> bool:
    """Write an encoded body into its snapshot's row, in the caller's transaction (its own
    if there is none): for a delta, one UPDATE that share-locks its base. False when the row
    has no body to receive any more (the sweeper wrote its rebuild first, or it is gone).
    `state` `rebuilt` and a `note` (added to the snapshot's notes) are the sweeper's."""
    with transaction.atomic(savepoint=False):
        if encoded.base is not None and note is None and _store_delta(encoded, state):
            _remember_on_commit(encoded)
            return True
        # Not stored above: a keyframe, the sweeper's note, a row that has its body already,
        # or a base dropped since the encoding (then a keyframe is stored instead).
        encoded, depth = _locked(encoded)
        columns = _columns(encoded, depth, state)
        rows = ProjectionSnapshot.objects.filter(pk=encoded.snapshot_id, body_state=State.PENDING)
        if note is not None:
            found = rows.select_for_update().values_list("notes", flat=True).first()
            if found is None:
                return False
            columns["notes"] = [*(found or []), note]
        written = rows.update(**columns) == 1
        if written:
            _remember_on_commit(encoded)
    return written


# --------------------------------------------------------------------------- the row


def _request_hash(body: dict[str, Any]) -> str:
    request = body.get("request")
    return snapshot_bodies.request_hash(request) if request is not None else ""


def snapshot_row_create(*, body: dict[str, Any], **fields: Any) -> ProjectionSnapshot:
    """Insert a turn's snapshot row without its body, in the caller's transaction: `fields`
    (session, run_id, revision, upper_bound, window_id, protocol, options, provider, notes,
    build_inputs) and the SHA-256 of `body`'s request. The instance carries `body` as its
    view in memory; `body_encode` and `body_store` write it later, and until then every other
    reader rebuilds it."""
    snapshot = ProjectionSnapshot.objects.create(
        **fields,
        body=None,
        body_encoding=Encoding.NONE,
        body_state=State.PENDING,
        request_hash=_request_hash(body),
    )
    snapshot.attach_view(SnapshotView(body=body))
    return snapshot


def snapshot_create(*, body: dict[str, Any], **fields: Any) -> ProjectionSnapshot:
    """Insert a turn's snapshot with its body, in one call (`fields` as `snapshot_row_create`
    takes them), in the caller's transaction if there is one: the session's newest body is
    read and share-locked as the base (no session lock is taken), the body encoded on it, and
    row and body inserted in one statement. The instance carries `body` as its view."""
    text, request = body_codec.body_texts(body)  # serialized once for the hash and the body
    digest = ""
    if request is not None and body.get("request") is not None:  # as `_request_hash`
        digest = hashlib.sha256(request.encode()).hexdigest()
    snapshot = ProjectionSnapshot(**fields, request_hash=digest)
    with transaction.atomic(savepoint=False):
        base = body_base(snapshot.session_id, lock=True)
        encoded = _encoded(base, snapshot.pk, text)
        depth = base.depth + 1 if encoded.base is not None and base is not None else 0
        for name, value in _columns(encoded, depth, State.STORED).items():
            setattr(snapshot, name, value)
        snapshot.save(force_insert=True)
    # (At once: a row that rolled back does not exist, so its id is nobody's base.)
    snapshot_bodies.remember(snapshot.pk, encoded.tokens)
    snapshot.attach_view(SnapshotView(body=body))
    return snapshot
