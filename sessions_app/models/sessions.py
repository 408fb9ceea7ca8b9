"""Sessions and their runs (contract §2.3, §7)."""

from __future__ import annotations

import uuid

from django.db import models
from django.db.models import Q

from agents.models import AgentVersion, Application


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
    # For a run a gateway request drives: the client API and the client's User-Agent.
    client_api = models.CharField(max_length=16, blank=True, default="", db_default="")
    client_agent = models.CharField(max_length=256, blank=True, default="", db_default="")

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
