"""Maintenance jobs (contract §6)."""

from __future__ import annotations

import uuid

from django.db import models
from django.db.models import Q

from sessions_app.models.sessions import Session


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
