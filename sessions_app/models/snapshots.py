"""Projection snapshots: one turn's frozen view and what it cost (contract §4, §4.6a, §8)."""

from __future__ import annotations

import json
import uuid
import zlib
from typing import Any

from django.db import models
from django.db.models import Q

from sessions_app.models.sessions import Run, Session
from sessions_app.store import hooks
from sessions_app.store.snapshot_view import SnapshotView


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
    session, in the turn's commit or a later one of the same turn (store/body_writer.py), and
    may be dropped after SNAPSHOT_BODY_RETENTION_DAYS (issue 33, contract §4.6a). Read it only
    through `view` (or `messages` / `sources` / `request`), which go through the one decoder
    (sessions_app/store/snapshot_bodies.py) and never answer an empty body for one that is
    not written yet or was dropped: they rebuild it.
    """

    class BodyState(models.TextChoices):
        STORED = "stored"  # as the turn built it
        PENDING = "pending"  # the row is committed, its body not yet (rebuilt on read)
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
