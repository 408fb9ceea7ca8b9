"""Cold archive chunks (contract §2.3, §7)."""

from __future__ import annotations

from django.db import models

from sessions_app.models.sessions import Session


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
