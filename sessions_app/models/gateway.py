"""Gateway requests and what they answered (contract §14)."""

from __future__ import annotations

import uuid

from django.db import models
from django.db.models import Q

from agents.models import Application
from sessions_app.models.sessions import Session


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
    # Null for a request whose key named no Application (a refused key, an unknown path):
    # every answer is counted (contract §14).
    application = models.ForeignKey(
        Application,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="gateway_exchanges",
    )
    session = models.ForeignKey(
        Session, null=True, blank=True, on_delete=models.CASCADE, related_name="gateway_exchanges"
    )
    client_format = models.CharField(max_length=16)
    # The request as operators look it up: its id (X-Request-Id), path and the client's
    # User-Agent.
    request_id = models.CharField(max_length=64, blank=True, default="", db_default="")
    path = models.CharField(max_length=200, blank=True, default="", db_default="")
    user_agent = models.CharField(max_length=256, blank=True, default="", db_default="")
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
    # The reply's id (`resp_…`, `msg_…`, `chatcmpl-…`; unique across the service) and, for
    # the Responses API (contract §21): the last MessageIndex of the reply, the response the
    # request continued (`previous_response_id`), whether it may be read or continued by id
    # (`store`), and when it was deleted (its id is unknown from then on).
    reply_id = models.CharField(max_length=64, null=True, blank=True)
    reply_end_index = models.BigIntegerField(null=True, blank=True)
    continues = models.CharField(max_length=64, blank=True, default="", db_default="")
    # A side request (contract §19.1): a client's background request (a title, a summary)
    # answered by the session's model from its own messages, outside the conversation; its
    # tokens and cost are the session's `sideUsage`.
    side = models.BooleanField(default=False, db_default=False)
    input_tokens = models.BigIntegerField(null=True, blank=True)
    cache_read_input_tokens = models.BigIntegerField(default=0, db_default=0)
    cache_write_input_tokens = models.BigIntegerField(default=0, db_default=0)
    output_tokens = models.BigIntegerField(null=True, blank=True)
    cost = models.DecimalField(max_digits=32, decimal_places=12, null=True, blank=True)
    # `new-session` when a request bringing a conversation in progress started a session
    # (contract §19.1: nothing named the conversation it continues).
    warning = models.CharField(max_length=32, blank=True, default="", db_default="")
    stored = models.BooleanField(default=True, db_default=True)
    deleted_at = models.DateTimeField(null=True, blank=True)
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
            ),
            models.UniqueConstraint(
                fields=["reply_id"],
                condition=Q(reply_id__isnull=False, replayed=False),
                name="gateway_reply_id",
            ),
        ]
        indexes = [
            models.Index(fields=["session", "-created_at"], name="gateway_session_recent"),
            # An identical request in flight on a session (contract §14: exactly once).
            models.Index(
                fields=["session", "request_hash"],
                condition=Q(status="running"),
                name="gateway_running",
            ),
            models.Index(fields=["created_at"], name="gateway_created"),
        ]

    def __str__(self) -> str:
        return f"{self.client_format} {self.status} {self.http_status or ''}".strip()


class GatewayCallId(models.Model):
    """A tool-call id the gateway minted for a call it handed to a client (contract §19.1):
    unique across the service, so a request that sends it back (the call or its result) names
    the call's session without any other sign of its conversation."""

    call_id = models.CharField(primary_key=True, max_length=64)
    application = models.ForeignKey(Application, on_delete=models.CASCADE, related_name="+")
    session = models.ForeignKey(
        "sessions_app.Session", on_delete=models.CASCADE, related_name="gateway_call_ids"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return self.call_id


class GatewayConversation(models.Model):
    """A conversation id a client sends on its own (contract §14, SPEC §19.1) and the session
    it names within an Application.

    `conversation_id` is the client's id (`X-Contextproto-Conversation`, Claude Code's
    `x-claude-code-session-id`, Codex's `session-id`); `agent_id` is '' for the conversation
    itself and a sub-agent's own id within it (Claude Code's `x-claude-code-agent-id`) for a
    child session, whose `parent` is the conversation's session. The unique constraint makes
    concurrent first requests of one id create one session.
    """

    id = models.BigAutoField(primary_key=True)
    application = models.ForeignKey(
        Application, on_delete=models.CASCADE, related_name="gateway_conversations"
    )
    conversation_id = models.CharField(max_length=255)
    agent_id = models.CharField(max_length=255, blank=True, default="")
    session = models.ForeignKey(
        Session, on_delete=models.CASCADE, related_name="gateway_conversations"
    )
    # The conversation's own session, for a sub-agent's child session; null for the main one.
    parent = models.ForeignKey(
        Session,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="gateway_children",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["application", "conversation_id", "agent_id"],
                name="gateway_conversation_unique",
            )
        ]

    def __str__(self) -> str:
        return f"{self.conversation_id}/{self.agent_id}" if self.agent_id else self.conversation_id
