"""Sessions, runs, the immutable message log, KV state and its secondary tables (contract §2.3)."""

from __future__ import annotations

import json
import uuid
import zlib
from typing import Any, NoReturn

from django.db import models
from django.db.models import Q

from agents.models import AgentVersion, Application
from contextproto.protocol.host_wire import TOOL_CALL_ID_MAX_CHARS
from contextproto.protocol.messages import KIND_TEXT, KIND_TOOL_CALL, KIND_TOOL_RESULT
from sessions_app.store import hooks
from sessions_app.store.snapshot_view import SnapshotView


class ImmutableMessageError(Exception):
    """Raised when code tries to change or delete a raw message outside the archive path."""


class Session(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    application = models.ForeignKey(Application, on_delete=models.PROTECT, related_name="sessions")
    agent_version = models.ForeignKey(
        AgentVersion, on_delete=models.PROTECT, related_name="sessions"
    )
    inputs = models.JSONField(default=dict, blank=True)
    # Bumped by exactly one per committed KV transaction.
    state_revision = models.BigIntegerField(default=0)
    # Next MessageIndex to hand out; gapless because it moves only under the row lock.
    next_message_index = models.BigIntegerField(default=1)
    # Copy of KV `activeWindow`, kept in the same transaction, so message writes need no KV read.
    active_window = models.CharField(max_length=64, default="main")
    current_run = models.ForeignKey(
        "Run", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    session_key_hash = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)
    # The lowest revision whose state KVHistory can reproduce: 0 for sessions started since
    # the history exists; a session seeded from its KV by migration 0010 knows only its state
    # at the revision it had then (docs/decisions.md).
    kv_history_from = models.BigIntegerField(default=0, db_default=0)
    # Set on a fork (contract §10): the session, bound and revision it was copied from.
    forked_from = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.PROTECT, related_name="forks"
    )
    forked_through_index = models.BigIntegerField(null=True, blank=True)
    forked_revision = models.BigIntegerField(null=True, blank=True)
    # Set by the first gateway request that drives the session (contract §14), for the console.
    via_gateway = models.BooleanField(default=False, db_default=False)

    class Meta:
        indexes = [
            models.Index(fields=["application", "-created_at"], name="session_app_recent"),
            # The console: sessions started in the last hour/day, search newest first.
            models.Index(fields=["-created_at", "-id"], name="session_created"),
        ]

    def __str__(self) -> str:
        return str(self.id)

    @property
    def last_index(self) -> int:
        return self.next_message_index - 1


class Run(models.Model):
    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        WAITING_FOR_HOST_TOOL = "waiting_for_host_tool"
        COMPLETED = "completed"
        FAILED = "failed"
        MAX_TURNS = "max_turns_reached"
        EXTERNAL = "external"

    # The RunId; rendered in "N" format (uuid.hex) on the wire.
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="runs")
    status = models.CharField(max_length=32, choices=Status.choices, default=Status.QUEUED)
    turns = models.PositiveIntegerField(default=0)
    error = models.JSONField(null=True, blank=True)
    # The worker advancing this run owns it until then (one worker per session at a time).
    lease_until = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # A fork's copy of a run records the RunId it was copied from (a RunId is global).
    forked_from_run_id = models.UUIDField(null=True, blank=True)
    # Driven by gateway requests (contract §14), not by a worker: the sweeper leaves it alone and a
    # client's tool result does not queue it; the next request of its session continues it.
    via_gateway = models.BooleanField(default=False, db_default=False)

    class Meta:
        indexes = [
            models.Index(fields=["session", "created_at"], name="run_session_created"),
            # The console's aggregates: runs started lately, runs in progress, failures.
            models.Index(fields=["created_at", "status"], name="run_created"),
            models.Index(
                fields=["status"],
                condition=Q(status__in=["queued", "running", "waiting_for_host_tool"]),
                name="run_in_progress",
            ),
            models.Index(
                fields=["finished_at"], condition=Q(status="failed"), name="run_failed_finished"
            ),
        ]

    def __str__(self) -> str:
        return self.id.hex


class MessageQuerySet(models.QuerySet):
    def update(self, **kwargs: Any) -> NoReturn:
        raise ImmutableMessageError("Messages are immutable; write a new message instead.")

    def delete(self) -> NoReturn:
        raise ImmutableMessageError(
            "Messages are immutable; only the archive move may remove hot rows."
        )


class Message(models.Model):
    class Role(models.TextChoices):
        USER = "user"
        ASSISTANT = "assistant"
        TOOL = "tool"

    class Kind(models.TextChoices):
        INPUT = "input"
        APPROVAL_FEEDBACK = "approval_feedback"
        RUNTIME_INSTRUCTION = "runtime_instruction"
        TEXT = KIND_TEXT
        TOOL_CALL = KIND_TOOL_CALL
        TOOL_RESULT = KIND_TOOL_RESULT

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    session = models.ForeignKey(Session, on_delete=models.DO_NOTHING, related_name="messages")
    index = models.BigIntegerField()
    window_id = models.CharField(max_length=64)
    role = models.CharField(max_length=16, choices=Role.choices)
    kind = models.CharField(max_length=32, choices=Kind.choices)
    content = models.JSONField()
    run = models.ForeignKey(
        Run, null=True, blank=True, on_delete=models.DO_NOTHING, related_name="+"
    )
    input_run = models.CharField(max_length=32, null=True, blank=True)
    tool_call_id = models.CharField(max_length=TOOL_CALL_ID_MAX_CHARS, null=True, blank=True)
    tool_name = models.CharField(max_length=128, null=True, blank=True)
    arguments = models.JSONField(null=True, blank=True)
    is_error = models.BooleanField(null=True, blank=True)
    snapshot_id = models.UUIDField(null=True, blank=True)
    created_at = models.DateTimeField()
    # The state revision committed when the message's transaction began (its own KV changes,
    # a dispatch's, come after): "the state before #N+1" of a fork by throughIndex. Null for
    # messages written before the column existed.
    written_at_revision = models.BigIntegerField(null=True, blank=True)
    # A fork's copy of a message names the MessageId it was copied from.
    forked_from_message_id = models.UUIDField(null=True, blank=True)
    # A tool_call's frame: the state revision R and upper bound U of the view it was made
    # from, frozen when the call is written; dispatch reads them here. Null on other kinds
    # and on calls written before the columns existed (dispatch reads their snapshot).
    frozen_revision = models.BigIntegerField(null=True, blank=True)
    frozen_upper_bound = models.BigIntegerField(null=True, blank=True)

    objects = MessageQuerySet.as_manager()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["session", "index"], name="message_unique_index"),
            models.UniqueConstraint(
                fields=["session", "tool_call_id"],
                condition=Q(kind=KIND_TOOL_CALL),
                name="message_unique_tool_call",
            ),
            models.UniqueConstraint(
                fields=["session", "tool_call_id"],
                condition=Q(kind=KIND_TOOL_RESULT),
                name="message_unique_tool_result",
            ),
        ]
        indexes = [
            # "window W above index C up to U"
            models.Index(fields=["session", "window_id", "index"], name="message_window_index"),
            # "inputs of run R"
            models.Index(
                fields=["session", "input_run", "index"],
                condition=Q(kind="input"),
                name="message_run_inputs",
            ),
            # "the newest framed calls": an MCP call at an older revision looks for its frame
            models.Index(
                fields=["session", "-index"],
                condition=Q(frozen_revision__isnull=False),
                name="message_framed_calls",
            ),
        ]

    def __str__(self) -> str:
        return f"#{self.index} {self.role}/{self.kind}"

    def save(self, *args: Any, **kwargs: Any) -> None:
        if not self._state.adding:
            raise ImmutableMessageError("Messages are immutable; write a new message instead.")
        super().save(*args, **kwargs)

    def delete(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise ImmutableMessageError("Messages are immutable; only the archive move removes rows.")


class KVEntry(models.Model):
    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="kv_entries")
    key = models.CharField(max_length=200)
    value = models.JSONField()
    # The state revision of the transaction that last wrote this key.
    revision = models.BigIntegerField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["session", "key"], name="kv_unique_key")]
        verbose_name = "KV entry"
        verbose_name_plural = "KV entries"

    def __str__(self) -> str:
        return self.key


class KVHistory(models.Model):
    """Every committed KV change of a session, kept beside KVEntry (contract §2.5, §10).

    One row per key a transaction wrote, at that transaction's revision: the value, or
    `deleted` for a removal. The state at revision R is, per key, the latest row with
    revision <= R unless it is a removal (one index range scan on the primary key). Rows are
    appended by the database in the statement that upserts KVEntry (a trigger, migration
    0011), so no KV write can miss its history; kv_apply_locked appends removals itself.
    """

    pk = models.CompositePrimaryKey("session", "key", "revision")
    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="kv_history")
    key = models.CharField(max_length=200)
    revision = models.BigIntegerField()
    value = models.JSONField(null=True, blank=True)
    deleted = models.BooleanField(default=False, db_default=False)

    class Meta:
        verbose_name = "KV history row"
        verbose_name_plural = "KV history"

    def __str__(self) -> str:
        return f"{self.key}@{self.revision}"


class FoldRecord(models.Model):
    """Secondary index of `fold/<id>` KV entries, written in the same transaction.

    Lets a turn read only the folds of W above C instead of scanning KV.
    """

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="fold_records")
    fold_id = models.CharField(max_length=32)
    window_id = models.CharField(max_length=64)
    first_index = models.BigIntegerField()
    last_index = models.BigIntegerField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["session", "fold_id"], name="fold_unique_id")
        ]
        indexes = [
            models.Index(fields=["session", "window_id", "first_index"], name="fold_window_first")
        ]

    def __str__(self) -> str:
        return f"{self.fold_id} #{self.first_index}-#{self.last_index}"


class WindowRecord(models.Model):
    """Secondary index of `window/<id>` KV entries (status and order for list/search)."""

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="window_records")
    window_id = models.CharField(max_length=64)
    status = models.CharField(max_length=16)
    created_at_index = models.BigIntegerField(default=0)
    # Messages written in this window (hot and archived), kept by message_append_locked so
    # operator pages never count a huge table.
    message_count = models.BigIntegerField(default=0, db_default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["session", "window_id"], name="window_unique_id")
        ]
        indexes = [
            models.Index(fields=["session", "created_at_index", "window_id"], name="window_order")
        ]

    def __str__(self) -> str:
        return self.window_id


class CompressedJSONField(models.BinaryField):
    """A JSON document stored as one zlib-compressed blob, read back exactly as written.

    Unlike jsonb it keeps key order (a provider request reads back as sent) and it costs one
    small write: a turn's view, sources and request are ~180 KiB of JSON that compress to
    ~40 KiB, mostly because the request repeats the view (BENCHMARKS.md, issue #13).
    """

    LEVEL = 1  # fast; the higher levels gain little on this text

    def get_db_prep_value(self, value: Any, connection: Any, prepared: bool = False) -> Any:
        if value is not None and not isinstance(value, bytes | memoryview):
            encoded = json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()
            value = zlib.compress(encoded, self.LEVEL)
        return super().get_db_prep_value(value, connection, prepared)

    def from_db_value(self, value: Any, expression: Any, connection: Any) -> Any:
        if value is None:
            return None
        return json.loads(zlib.decompress(value))


class ProjectionSnapshot(models.Model):
    """One turn's frozen view: R/U/run/W, the options, the view with its sources and the
    provider request as sent (`body`), plus the provider's usage once reported.

    The body is stored whole (a keyframe) or as a delta against an earlier body of the
    session, possibly after the turn's commit, and may be dropped after
    SNAPSHOT_BODY_RETENTION_DAYS (issue 33, contract §4.6a). Read it only through `view` (or
    `messages` / `sources` / `request`), which go through the one decoder
    (sessions_app/store/snapshot_bodies.py) and never answer an empty body for one that is
    not written yet or was dropped: they wait for it or rebuild it.
    """

    class BodyState(models.TextChoices):
        STORED = "stored"  # as the turn built it
        PENDING = "pending"  # the row is committed, the body is being written after it
        REBUILT = "rebuilt"  # written by the sweeper from the state at R (the turn's was lost)
        DROPPED = "dropped"  # removed by retention; rebuilt on read

    class BodyEncoding(models.TextChoices):
        JSON = "json"  # zlib of the JSON text, as every body was stored before issue 33
        KEY = "key"  # the same, plus its token lengths (store/body_codec.py)
        DELTA = "delta"  # against `body_base`
        NONE = "none"  # no body stored (pending or dropped)

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="snapshots")
    run = models.ForeignKey(Run, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    revision = models.BigIntegerField()
    upper_bound = models.BigIntegerField()
    window_id = models.CharField(max_length=64)
    protocol = models.CharField(max_length=64)
    options = models.JSONField(default=dict)
    provider = models.CharField(max_length=32)
    # The encoded body of {"messages": [...], "sources": [...], "request": {...}}, as
    # `body_encoding` says; null with no body. Read through `view`, never directly.
    body = models.BinaryField(null=True, blank=True)
    body_encoding = models.CharField(
        max_length=8, choices=BodyEncoding.choices, default=BodyEncoding.JSON
    )
    body_state = models.CharField(max_length=8, choices=BodyState.choices, default=BodyState.STORED)
    # A delta's base (an earlier snapshot of the same session) and how many deltas lead to
    # this body from its keyframe (0 for a keyframe).
    body_base = models.UUIDField(null=True, blank=True)
    body_depth = models.PositiveSmallIntegerField(default=0)
    # Bytes stored for the body (the encoded column) and of its JSON text; null when not known
    # (bodies stored before they were counted).
    body_bytes = models.PositiveIntegerField(null=True, blank=True)
    view_bytes = models.PositiveIntegerField(null=True, blank=True)
    # SHA-256 of the provider request's JSON text as sent, recorded by the turn, so a rebuilt
    # body says whether it matches; empty on snapshots older than it.
    request_hash = models.CharField(max_length=64, blank=True, default="")
    notes = models.JSONField(default=list)
    # What the view depended on outside the state at R, the raw log and the published
    # version: `toolResultPreviewChars` (a host setting that may change) and, where the view
    # states it (unified@4), `maintenancePending`. Null on snapshots built before it was
    # recorded; a replay then says what it assumed (docs/decisions.md).
    build_inputs = models.JSONField(null=True, blank=True)
    # Provider-reported usage of the turn that used this snapshot, as reported.
    usage = models.JSONField(null=True, blank=True)
    # The same by kind (contract §8), so totals are one SUM: input counts every input token,
    # cache reads and writes included; null input = no usage reported yet. `cost` is the
    # turn's cost at the version's prices (null without prices), to
    # contextproto.usage.COST_DECIMAL_PLACES.
    input_tokens = models.BigIntegerField(null=True, blank=True)
    cache_read_input_tokens = models.BigIntegerField(default=0)
    cache_write_input_tokens = models.BigIntegerField(default=0)
    output_tokens = models.BigIntegerField(null=True, blank=True)
    cost = models.DecimalField(max_digits=32, decimal_places=12, null=True, blank=True)
    # How long the built-in runtime's provider call of this turn took, in milliseconds. Null
    # for a host-driven turn (the host calls its model, the service never sees the call) and
    # for turns recorded before it was measured.
    model_latency_ms = models.PositiveIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [
            models.Index(fields=["session", "created_at"], name="snapshot_session_created"),
            # The console: today's reported turns; the views that could show a message.
            models.Index(
                fields=["created_at"],
                condition=Q(input_tokens__isnull=False),
                name="snapshot_reported_created",
            ),
            models.Index(
                fields=["session", "window_id", "upper_bound"], name="snapshot_window_bound"
            ),
            # The body sweeper: bodies still not written; bodies retention may drop; the
            # deltas built on a body it drops.
            models.Index(
                fields=["created_at"],
                condition=Q(body_state="pending"),
                name="snapshot_body_pending",
            ),
            models.Index(
                fields=["created_at"],
                condition=Q(body_state__in=["stored", "rebuilt"]),
                name="snapshot_body_kept",
            ),
            models.Index(
                fields=["body_base"],
                condition=Q(body_base__isnull=False),
                name="snapshot_body_base",
            ),
        ]

    def __str__(self) -> str:
        return f"snapshot r{self.revision} u{self.upper_bound}"

    @property
    def view(self) -> SnapshotView:
        """The body as the turn sent it, decoded (or rebuilt) once per instance."""
        found = self.__dict__.get("_view")
        if found is None:
            found = hooks.snapshot_view(self)
            self.__dict__["_view"] = found
        return found

    def attach_view(self, view: SnapshotView) -> None:
        """Give this instance its body (the turn that built it, or a batch decode)."""
        self.__dict__["_view"] = view

    # The view's messages and their ProjectionSources (wire shapes) and the provider request.
    @property
    def messages(self) -> Any:
        return self.view.body.get("messages")

    @property
    def sources(self) -> Any:
        return self.view.body.get("sources")

    @property
    def request(self) -> Any:
        return self.view.body.get("request")


class ToolReceipt(models.Model):
    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="receipts")
    tool_call_id = models.CharField(max_length=TOOL_CALL_ID_MAX_CHARS)
    tool_name = models.CharField(max_length=128)
    result = models.JSONField()
    success = models.BooleanField()
    state_revision = models.BigIntegerField()
    result_message = models.ForeignKey(
        Message, on_delete=models.DO_NOTHING, related_name="+", db_constraint=False
    )
    # How long the dispatch took under the session lock (handler, KV writes, result), in
    # milliseconds; null on receipts written before it was measured.
    duration_ms = models.PositiveIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["session", "tool_call_id"], name="receipt_unique_tool_call"
            )
        ]
        indexes = [
            models.Index(fields=["session", "created_at"], name="receipt_session_created"),
            # The console: error receipts of the last hour.
            models.Index(
                fields=["created_at"], condition=Q(success=False), name="receipt_failed_created"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.tool_name} {self.tool_call_id}"


class MaintenanceJob(models.Model):
    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        COMMITTED = "committed"
        REJECTED = "rejected"
        FAILED = "failed"

    ACTIVE_STATUSES = (Status.QUEUED, Status.RUNNING)

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="maintenance_jobs")
    window_id = models.CharField(max_length=64)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED)
    external = models.BooleanField(default=False)
    trigger = models.CharField(max_length=32, blank=True)
    frozen_revision = models.BigIntegerField(null=True, blank=True)
    from_index = models.BigIntegerField(null=True, blank=True)
    through_index = models.BigIntegerField(null=True, blank=True)
    source_hash = models.CharField(max_length=64, blank=True)
    page_count = models.PositiveIntegerField(default=0)
    pages_read = models.PositiveIntegerField(default=0)
    attempts = models.PositiveIntegerField(default=0)
    # A worker owns a running job until this time and renews it while it works; after it, a
    # sweeper or a redelivery may take the job over (the commit is fenced by the frozen
    # revision either way).
    lease_until = models.DateTimeField(null=True, blank=True)
    # The fence of the current attempt: every write by a worker requires its own token here,
    # so a worker whose lease was taken over can neither overwrite the row nor commit.
    lease_token = models.UUIDField(null=True, blank=True, editable=False)
    # One entry per attempt: {attempt, worker, startedAt, endedAt, outcome, reason}.
    attempt_log = models.JSONField(default=list, blank=True)
    not_before = models.DateTimeField(null=True, blank=True)
    tokens_before = models.PositiveIntegerField(null=True, blank=True)
    tokens_after = models.PositiveIntegerField(null=True, blank=True)
    summarizer_usage = models.JSONField(null=True, blank=True)
    # Model calls made for this job; a scripted maintainer's step index is their session sum.
    summary_calls = models.PositiveIntegerField(default=0)
    reason = models.TextField(blank=True)
    history = models.JSONField(default=list, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["session", "window_id"],
                condition=Q(status__in=["queued", "running"]),
                name="maintenance_one_active_per_window",
            )
        ]
        indexes = [
            models.Index(fields=["status", "updated_at"], name="maintenance_status"),
            models.Index(fields=["session", "created_at"], name="maintenance_session_created"),
        ]

    def __str__(self) -> str:
        return f"maintenance {self.window_id} {self.status}"


class ArchiveChunk(models.Model):
    """A compressed run of consecutive messages moved out of the hot table (contract §2.3)."""

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="archive_chunks")
    first_index = models.BigIntegerField()
    last_index = models.BigIntegerField()
    message_count = models.PositiveIntegerField()
    data = models.BinaryField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["session", "first_index"], name="archive_unique_first")
        ]
        indexes = [models.Index(fields=["session", "last_index"], name="archive_last")]

    def __str__(self) -> str:
        return f"archive #{self.first_index}-#{self.last_index}"


class ClientWrite(models.Model):
    """A host write sent with a client message id: a retry replays it instead of writing twice.

    Kept apart from Message so the archive never moves it: a retry finds the message by index,
    hot or cold.
    """

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="client_writes")
    client_message_id = models.CharField(max_length=128)
    # sha256 of the request the id was first used with; another request with it is refused.
    request_hash = models.CharField(max_length=64)
    message_index = models.BigIntegerField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["session", "client_message_id"], name="client_write_unique_id"
            )
        ]

    def __str__(self) -> str:
        return f"{self.client_message_id} → #{self.message_index}"


class HostTurn(models.Model):
    """A model answer a host recorded with `POST sessions/{id}/turns/` (contract §5.2a).

    One per snapshot (a view has one answer): the same body again is a replay, answered from
    the log and the receipts; another body is refused. Kept apart from Message so the archive
    never moves it; the answer's messages are found by index, hot or cold.
    """

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="host_turns")
    snapshot_id = models.UUIDField()
    # sha256 of the body ({answer, usage}) the turn was recorded with.
    request_hash = models.CharField(max_length=64)
    # The answer's messages and the service's own results for it (MessageIndex, inclusive);
    # the dispatched results come after them.
    first_index = models.BigIntegerField()
    last_index = models.BigIntegerField()
    # The answer's protocol calls, dispatched in order; the call handed to the host, if any.
    protocol_calls = models.JSONField(default=list)
    host_call_id = models.CharField(max_length=TOOL_CALL_ID_MAX_CHARS, null=True, blank=True)
    # The status of the answer's run once the turn was written, as its answer said it (a
    # replay answers the same even after a new input closed the run).
    run_status = models.CharField(max_length=32, null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["session", "snapshot_id"], name="host_turn_snapshot")
        ]

    def __str__(self) -> str:
        return f"turn #{self.first_index}-#{self.last_index}"


class GatewayExchange(models.Model):
    """One gateway request (contract §14) and what it answered.

    Written when the request is authenticated and finished when it ends: the stored reply
    answers a retry of the same request (byte for byte) and an `Idempotency-Key` used again;
    the console counts requests and errors from these rows. Never holds the upstream key.
    """

    class Status(models.TextChoices):
        RUNNING = "running"
        REPLIED = "replied"
        FAILED = "failed"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    application = models.ForeignKey(
        Application, on_delete=models.CASCADE, related_name="gateway_exchanges"
    )
    session = models.ForeignKey(
        Session, null=True, blank=True, on_delete=models.CASCADE, related_name="gateway_exchanges"
    )
    client_format = models.CharField(max_length=16)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.RUNNING)
    # The client's Idempotency-Key (cleared once older than a day, so it may be used again)
    # and the hash of the body it came with.
    idempotency_key = models.CharField(max_length=255, null=True, blank=True)
    request_hash = models.CharField(max_length=64)
    http_status = models.PositiveSmallIntegerField(null=True, blank=True)
    error_code = models.CharField(max_length=64, blank=True)
    # The reply in neither API's words, the body exactly as sent (non-streamed form) and the
    # headers that went with it.
    reply = models.JSONField(null=True, blank=True)
    reply_body = models.TextField(blank=True)
    reply_headers = models.JSONField(default=dict, blank=True)
    # The MessageIndex of the reply's first answer: the transcript before it is what a retry
    # of this request repeats.
    reply_start_index = models.BigIntegerField(null=True, blank=True)
    turns = models.PositiveIntegerField(default=0)
    streamed = models.BooleanField(default=False)
    # Answered from another exchange's stored reply, without a model call.
    replayed = models.BooleanField(default=False)
    # Milliseconds in the gateway outside the upstream calls, and in the upstream calls.
    gateway_ms = models.PositiveIntegerField(null=True, blank=True)
    upstream_ms = models.PositiveIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["application", "idempotency_key"],
                condition=Q(idempotency_key__isnull=False),
                name="gateway_idempotency_key",
            )
        ]
        indexes = [
            models.Index(fields=["session", "-created_at"], name="gateway_session_recent"),
            models.Index(fields=["created_at"], name="gateway_created"),
        ]

    def __str__(self) -> str:
        return f"{self.client_format} {self.status} {self.http_status or ''}".strip()
