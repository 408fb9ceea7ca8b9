"""The one decoder every reader reads snapshot bodies through (issue 33, contract §4.6a).

`view_of` / `views_of` decode a body, following its delta chain (one statement for any number
of snapshots). A snapshot without a body — not written yet (its turn stores it with its
answer, store/body_writer.py), lost with its process, or dropped by retention
(store/body_retention.py) — or whose body does not decode is rebuilt at once from the state
at R and the log through U and says so; nothing waits for a body, and nothing is ever served
as an empty view.

Bodies never change once written (retention re-encodes a delta as a keyframe of the same
tokens), so this module keeps the few most recent decoded bodies by id (`_decoded`): a delta's
base is usually the body this process wrote or read last. Only this module touches that
cache; the writer hands it the tokens of a body it stored through `remember`.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from django.db import connection, models

from sessions_app.models import ProjectionSnapshot
from sessions_app.store import body_codec, hooks
from sessions_app.store.snapshot_view import REBUILT, SnapshotView

logger = logging.getLogger(__name__)

State = ProjectionSnapshot.BodyState
Encoding = ProjectionSnapshot.BodyEncoding
TABLE = ProjectionSnapshot._meta.db_table
_UUID = models.UUIDField()
_NO_ID = UUID(int=0)

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


def request_hash(request: Any) -> str:
    """SHA-256 of the request's JSON text as stored (contract §4.6a `bodyHashMatches`)."""
    return hashlib.sha256(body_codec.body_text(request).encode()).hexdigest()


def db_uuid(value: Any) -> Any:
    return _UUID.get_db_prep_value(value, connection)


def as_uuid(value: Any) -> UUID:
    return value if isinstance(value, UUID) else UUID(str(value))


def _bytes(value: Any) -> bytes:
    return bytes(value) if value is not None else b""


# --------------------------------------------------------------------------- the cache


class _Decoded:
    """Decoded bodies (as tokens) by snapshot id, the most recent few. Threads share it (a
    gateway encodes beside its request), hence the lock."""

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


_decoded = _Decoded()


def remember(snapshot_id: UUID, tokens: list[str]) -> None:
    """Keep the tokens of a body just stored (the writer's), the likely base of the next."""
    _decoded.put(snapshot_id, tokens)


def forget_cache() -> None:
    """Drop the decoded bodies this process keeps (tests and benches that time cold reads)."""
    _decoded.clear()


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
    known = _decoded.known() or [_NO_ID]  # (an empty IN () is not SQL)
    sql = _CHAIN_SQL.format(
        table=TABLE,
        targets=", ".join(["%s"] * len(ids)),
        known=", ".join(["%s"] * len(known)),
    )
    params = [db_uuid(i) for i in ids] + [db_uuid(k) for k in known]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    found = {}
    for row_id, base, encoding, data, state in rows:
        row = _Row(
            as_uuid(row_id),
            as_uuid(base) if base is not None else None,
            encoding,
            _bytes(data),
            state,
        )
        found[row.id] = row
    return found


def tokens_of(snapshot_id: UUID, rows: dict[UUID, _Row] | None = None) -> list[str]:
    """A written body's tokens (the base of a delta, or a delta itself), decoded from `rows`
    or read. Raises `body_codec.CodecError` for a body that is not there or does not decode."""
    rows = {} if rows is None else rows
    chain: list[_Row] = []
    at: UUID | None = snapshot_id
    tokens: list[str] | None = None
    while at is not None:
        tokens = _decoded.get(at)
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
            if tokens is None:
                raise body_codec.CodecError(f"snapshot {row.id}: a delta without its base")
            tokens = body_codec.decode_delta(tokens, row.data)
        elif row.encoding == Encoding.KEY:
            tokens = body_codec.decode_key(row.data)
        else:
            tokens = body_codec.tokenize(json.loads(body_codec.legacy_text(row.data)))
        _decoded.put(row.id, tokens)
    if tokens is None:
        raise body_codec.CodecError(f"snapshot {snapshot_id} has no stored body to decode from")
    return tokens


def _body(snapshot_id: UUID, rows: dict[UUID, _Row]) -> dict[str, Any]:
    """A written body as the turn built it ({} for a row made without one: usage-only rows)."""
    cached = _decoded.get(snapshot_id)
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
            text = body_codec.join(tokens_of(row.id, rows))
    body = json.loads(text)
    return body if isinstance(body, dict) else {}


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
    rows = _chain_rows([s.pk for s in todo if not _known(s)])
    for snapshot in todo:
        snapshot.attach_view(_view(snapshot, rows))


def view_of(snapshot: ProjectionSnapshot) -> SnapshotView:
    """The snapshot's view (installed as `hooks.snapshot_view`, read by `snapshot.view`)."""
    whole = _whole(snapshot)
    if whole is not None:
        return whole
    rows = {} if _known(snapshot) else _chain_rows([snapshot.pk])
    return _view(snapshot, rows)


def _known(snapshot: ProjectionSnapshot) -> bool:
    """Whether the snapshot's body is decoded here already and its row, as loaded, says it
    has one (a row loaded before its body was written, or without its state, asks the table
    again: never a query per snapshot for a deferred field)."""
    if _decoded.get(snapshot.pk) is None:
        return False
    return snapshot.__dict__.get("body_state") in (State.STORED, State.REBUILT)


def _view(snapshot: ProjectionSnapshot, rows: dict[UUID, _Row]) -> SnapshotView:
    """The body as stored, or rebuilt when there is none: the row's state as just read (the
    instance may be older than the body's write) decides."""
    row = rows.get(snapshot.pk)
    state = row.state if row is not None else snapshot.body_state
    if state in (State.PENDING, State.DROPPED):
        return _rebuild(snapshot)
    try:
        body = _body(snapshot.pk, rows)
    except body_codec.CodecError:
        # A stored body that does not decode (corrupt bytes): said again from the state at R.
        logger.exception("snapshot %s: its stored body does not decode; rebuilt", snapshot.pk)
        return _rebuild(snapshot)
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
