"""Exactly-once records: tool receipts, client message ids, host turns (contract §5.3, §5.2a)."""

from __future__ import annotations

from django.db import models
from django.db.models import Q

from contextproto.protocol.host_wire import TOOL_CALL_ID_MAX_CHARS
from sessions_app.models.log import Message
from sessions_app.models.sessions import Session


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
