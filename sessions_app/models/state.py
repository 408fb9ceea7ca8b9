"""KV state, its history and its secondary tables (folds, windows) (contract §2.3, §10)."""

from __future__ import annotations

from django.db import models

from sessions_app.models.sessions import Session


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
    # Messages written in this window (hot and archived), kept by message_write_locked so
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
