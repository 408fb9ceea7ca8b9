"""Fork a session at a turn (contract §10): a new session whose log and state are the original's
up to a bound, the original untouched.

What is read of the original never changes once written: messages #1..bound (immutable; the
merged readers follow archive moves) and KV history rows up to the fork's revision. So the
fork holds no lock on the original, whose writers go on meanwhile; it reads the original's
revision and last index once, in one row read, and builds the new session in one
transaction of its own.

The copy (docs/decisions.md "Forks"): messages keep their index, window, role, kind,
content, tool fields, `snapshotId` (the view the call was generated from, in the original)
and `createdAt`, get new MessageIds and name their original in `forked_from_message_id`.
Each run of the copied messages gets a new RunId (a RunId is global) recording its
original; input runs and the current run follow that map. The KV history up to the
revision is copied with fold records' messageIds mapped to the new ids, so the fork reads
its own past states as the original did; the fold and window tables are rebuilt from it.
Receipts, snapshots, maintenance jobs, client write ids and archive chunks are not copied.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, replace
from typing import Any, TypedDict
from uuid import UUID

from django.db import IntegrityError, transaction
from django.utils import timezone

from agents.models import AgentVersion
from contextproto.errors import (
    FORK_AGENT_MISMATCH,
    FORK_BOUND_OUT_OF_RANGE,
    FORK_PROTOCOL_INCOMPATIBLE,
    INVALID_REQUEST,
    REVISION_NOT_RECORDED,
    ApplicationError,
    NotFound,
)
from contextproto.ids import parse_uuid
from contextproto.protocol.forks import fork_bound
from contextproto.protocol.messages import KIND_INPUT, KIND_TEXT, KIND_TOOL_CALL, RawMessage
from contextproto.protocol.state import FOLD_PREFIX, KEY_ACTIVE_WINDOW, MAIN_WINDOW
from sessions_app.models import (
    KVHistory,
    Message,
    ProjectionSnapshot,
    Run,
    Session,
    WindowRecord,
)
from sessions_app.reads.history import kv_history_through, revision_check
from sessions_app.reads.raw_log import log_records
from sessions_app.services.sessions import agent_version_startable_check, session_key_new
from sessions_app.store.codec import raw_from_record, row_from_record
from sessions_app.store.state import kv_install_locked

# Messages read and written per statement while copying the log.
COPY_BATCH = 500


class ForkPointWire(TypedDict):
    """A session's `forkedFrom` (contract §12.1)."""

    sessionId: str
    throughIndex: int
    revision: int


@dataclass(frozen=True)
class ForkPoint:
    """Where a fork was taken: the original session, the bound used and the revision."""

    session_id: UUID
    through_index: int
    revision: int

    def to_wire(self) -> ForkPointWire:
        return {
            "sessionId": str(self.session_id),
            "throughIndex": self.through_index,
            "revision": self.revision,
        }


def fork_point_of(session: Session) -> ForkPoint | None:
    """The point `session` was forked at, or None for a session that is no fork."""
    if session.forked_from_id is None:
        return None
    return ForkPoint(
        session_id=session.forked_from_id,
        through_index=int(session.forked_through_index or 0),
        revision=int(session.forked_revision or 0),
    )


def session_fork(
    *,
    session: Session,
    snapshot_id: Any = None,
    through_index: int | None = None,
    agent_version: AgentVersion | None = None,
    keep_pending_call: bool = False,
) -> tuple[Session, str]:
    """Fork `session` at a snapshot's turn or after a message; return the fork and its key.

    Exactly one of `snapshot_id` (bound and revision: the snapshot's U and R) and
    `through_index` (the revision committed before message throughIndex + 1 was written).
    A bound inside a group with an unanswered call moves back before that group (the
    revision then is the one before the group's first message). `agent_version`: another
    published version of the same Agent whose protocol keeps state the same way.
    Refusals (nothing written): `invalid_request` (both or neither bound), 404 for a
    snapshot of another session, `fork_bound_out_of_range`, `fork_agent_mismatch`,
    `fork_protocol_incompatible`, `agent_version_not_published` / `agent_version_archived`,
    `revision_not_recorded` (a point older than the session's KV history).
    The session key is returned in clear only here. `keep_pending_call`: the bound stays
    where it is even after a call that waits for its result (a gateway request forks at a
    reply that handed a call to its client and brings that call's result itself).
    """
    if (snapshot_id is None) == (through_index is None):
        raise ApplicationError(
            INVALID_REQUEST,
            "Send exactly one of snapshotId (fork at that turn) and throughIndex (fork after "
            "that message).",
            {"field": "snapshotId" if snapshot_id is not None else "throughIndex"},
        )
    version = _fork_version(session, agent_version)
    # One row read: the revision and the last index belong together.
    original = Session.objects.get(pk=session.pk)
    if snapshot_id is not None:
        snapshot = (
            ProjectionSnapshot.objects.filter(
                session=original, pk=parse_uuid(snapshot_id, "Snapshot")
            )
            .values_list("revision", "upper_bound")
            .first()
        )
        if snapshot is None:
            raise NotFound("Snapshot", {"field": "snapshotId"})
        revision, wanted = snapshot
    else:
        wanted, revision = int(through_index or 0), None
        if not 0 <= wanted <= original.last_index:
            raise ApplicationError(
                FORK_BOUND_OUT_OF_RANGE,
                f"throughIndex must be between 0 and {original.last_index}, the session's "
                f"last MessageIndex (you sent {wanted}).",
                {"field": "throughIndex", "lastIndex": original.last_index},
            )
    log = _outline(original.pk, wanted)
    bound = wanted if keep_pending_call else fork_bound(log, wanted)
    if revision is None or bound != wanted:
        revision = _revision_before(original, bound + 1)
    revision_check(original, revision)
    with transaction.atomic():
        return _copy(original, version, log[:bound], bound, revision)


def _fork_version(session: Session, wanted: AgentVersion | None) -> AgentVersion:
    """The version the fork runs on: the original's, or `wanted` if it may take its state."""
    current = session.agent_version
    version = wanted or current
    if version.agent_id != current.agent_id:
        raise ApplicationError(
            FORK_AGENT_MISMATCH,
            "agentVersionId must name a version of the Agent the session runs "
            f"({current.agent_id}); a fork keeps the agent and may change its version only.",
            {"field": "agentVersionId", "agentId": str(current.agent_id)},
        )
    if version.context_protocol_id != current.context_protocol_id:
        raise ApplicationError(
            FORK_PROTOCOL_INCOMPATIBLE,
            f"The session runs {current.protocol_key}, whose state {version.protocol_key} "
            f"does not keep the same way; pick a version of protocol "
            f"{current.context_protocol_id}.",
            {
                "field": "agentVersionId",
                "protocol": current.protocol_key,
                "requested": version.protocol_key,
            },
        )
    agent_version_startable_check(version)
    return version


def _outline(session_id: UUID, through_index: int) -> list[RawMessage]:
    """Messages #1..through without their bodies: what the bound and the runs need."""
    outline: list[RawMessage] = []
    for after in range(0, through_index, COPY_BATCH):
        records = log_records(
            session_id, after_index=after, through_index=min(after + COPY_BATCH, through_index)
        )
        outline.extend(replace(raw_from_record(r), content="", arguments=None) for r in records)
    return outline


def _revision_before(original: Session, index: int) -> int:
    """The revision committed before message #index was written (now, past the log's end)."""
    if index > original.last_index:
        return original.state_revision
    records = log_records(original.pk, after_index=index - 1, through_index=index)
    revision = records[0].get("written_at_revision") if records else None
    if revision is None:
        raise ApplicationError(
            REVISION_NOT_RECORDED,
            f"Message #{index} was written before this service recorded the revision of each "
            "message, so the state before it is unknown; fork at a snapshot taken since, or "
            "at the end of the log.",
            {"field": "throughIndex", "index": index},
        )
    return int(revision)


def _copy(
    original: Session, version: AgentVersion, log: list[RawMessage], bound: int, revision: int
) -> tuple[Session, str]:
    """Write the fork: session, runs, messages, KV and its tables. Inside a transaction."""
    history = kv_history_through(original.pk, revision)
    newest = {row.key: row for row in history}
    active = newest.get(KEY_ACTIVE_WINDOW)
    raw_key, key_hash = session_key_new()
    fork = Session.objects.create(
        application_id=original.application_id,
        agent_version=version,
        inputs=original.inputs,
        session_key_hash=key_hash,
        state_revision=revision,
        next_message_index=bound + 1,
        active_window=str(active.value) if active and not active.deleted else MAIN_WINDOW,
        kv_history_from=original.kv_history_from,
        forked_from=original,
        forked_through_index=bound,
        forked_revision=revision,
    )
    runs = _copy_runs(original, fork, version, log)
    current_input = next((m for m in reversed(log) if m.kind == KIND_INPUT), None)
    if current_input is not None and current_input.input_run in runs:
        fork.current_run_id = runs[current_input.input_run]
        fork.save(update_fields=["current_run"])
    ids = _copy_messages(original, fork, bound, runs)
    kv_install_locked(
        fork,
        [
            KVHistory(
                session=fork,
                key=row.key,
                revision=row.revision,
                value=_fold_mapped(row.key, row.value, ids) if not row.deleted else None,
                deleted=row.deleted,
            )
            for row in history
        ],
    )
    counts: dict[str, int] = {}
    for message in log:
        counts[message.window_id] = counts.get(message.window_id, 0) + 1
    records = list(WindowRecord.objects.filter(session=fork))
    for record in records:
        record.message_count = counts.get(record.window_id, 0)
    WindowRecord.objects.bulk_update(records, ["message_count"])
    return fork, raw_key


def _copy_runs(
    original: Session, fork: Session, version: AgentVersion, log: list[RawMessage]
) -> dict[str, UUID]:
    """Copy the runs the copied messages belong to; return original RunId (hex) -> new id.

    The copies are finished (a fork runs nothing by itself); the run current at the bound
    stays open for an external host, which drives its sessions through the API. Each copy
    counts the model answers of its run up to the bound as its turns (a scripted model's
    next step follows from them) and keeps the original's creation time.
    """
    turns: dict[str, int] = {}
    answers: set[tuple[str, str]] = set()
    wanted: list[str] = []
    for message in log:
        for run_hex in (message.run_id, message.input_run):
            if run_hex and run_hex not in turns:
                turns[run_hex] = 0
                wanted.append(run_hex)
        if message.run_id and message.kind == KIND_TEXT:
            turns[message.run_id] += 1
        elif message.run_id and message.kind == KIND_TOOL_CALL:
            # The calls of one model answer share its snapshot.
            answer = (message.run_id, message.snapshot_id or message.id)
            if answer not in answers:
                answers.add(answer)
                turns[message.run_id] += 1
    originals = {run.id.hex: run for run in Run.objects.filter(session=original, id__in=wanted)}
    current_hex = next(
        (m.input_run for m in reversed(log) if m.kind == KIND_INPUT and m.input_run), None
    )
    now = timezone.now()
    copies = []
    for run_hex in wanted:
        source = originals.get(run_hex)
        if source is None:
            raise IntegrityError(f"session {original.pk}: run {run_hex} of its log is missing")
        open_ = run_hex == current_hex and version.model_provider == "external"
        copies.append(
            Run(
                id=uuid.uuid4(),
                session=fork,
                status=Run.Status.EXTERNAL if open_ else Run.Status.COMPLETED,
                turns=turns[run_hex],
                finished_at=None if open_ else source.finished_at or now,
                forked_from_run_id=source.id,
            )
        )
    Run.objects.bulk_create(copies)
    # created_at is set on insert; the copies keep their originals' (the cold readers bound
    # a run's input search by it).
    # Every copy names its original (set just above).
    source_of = {copy.id: uuid.UUID(str(copy.forked_from_run_id)) for copy in copies}
    for copy in copies:
        copy.created_at = originals[source_of[copy.id].hex].created_at
    Run.objects.bulk_update(copies, ["created_at"])
    return {source_of[copy.id].hex: copy.id for copy in copies}


def _copy_messages(
    original: Session, fork: Session, bound: int, runs: dict[str, UUID]
) -> dict[str, str]:
    """Copy messages #1..bound with new ids; return original MessageId -> new MessageId."""
    ids: dict[str, str] = {}
    for after in range(0, bound, COPY_BATCH):
        records = log_records(
            original.pk, after_index=after, through_index=min(after + COPY_BATCH, bound)
        )
        rows = []
        for record in records:
            # The archived columns through the one codec, then what a copy changes: its own
            # id, session and runs, and the original it came from.
            row = row_from_record(fork.pk, record)
            row.id = uuid.uuid4()
            ids[record["id"]] = str(row.id)
            row.run_id = runs[row.run_id.hex] if row.run_id else None
            row.input_run = runs[record["input_run"]].hex if record["input_run"] else None
            row.forked_from_message_id = UUID(record["id"])
            rows.append(row)
        Message.objects.bulk_create(rows)
    if len(ids) != bound:
        raise IntegrityError(f"session {original.pk}: copied {len(ids)} of {bound} messages")
    return ids


def _fold_mapped(key: str, value: Any, ids: dict[str, str]) -> Any:
    """A fold record with its messageIds replaced by the fork's copies of those messages."""
    if not key.startswith(FOLD_PREFIX) or not isinstance(value, dict):
        return value
    message_ids = value.get("messageIds") or []
    missing = [m for m in message_ids if m not in ids]
    if missing:
        # A fold at or below the fork's revision covers messages below its call, which the
        # bound includes: a missing one means the log and the history disagree.
        raise IntegrityError(f"{key} names messages outside the fork's log: {missing[:3]}")
    return {**value, "messageIds": [ids[m] for m in message_ids]}
