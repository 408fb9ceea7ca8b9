"""The immutable message log (contract §2.3)."""

from __future__ import annotations

import uuid
from typing import Any, NoReturn

from django.db import models
from django.db.models import Q

from contextproto.protocol.host_wire import TOOL_CALL_ID_MAX_CHARS
from contextproto.protocol.messages import KIND_TEXT, KIND_TOOL_CALL, KIND_TOOL_RESULT
from sessions_app.models.sessions import Run, Session


class ImmutableMessageError(Exception):
    """Raised when code tries to change or delete a raw message outside the archive path."""


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
