"""Retention of snapshot bodies (issue 33, contract §4.6a): drops, and the sweeps' queries.

A body is dropped and its row kept (`bodies_drop`); the body sweeps
(maintenance/body_sweeps.py) find the bodies to rebuild or drop here.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any
from uuid import UUID

from django.db import models, transaction

from sessions_app.models import ProjectionSnapshot
from sessions_app.store import body_codec
from sessions_app.store.snapshot_bodies import Encoding, State, as_uuid, tokens_of


def bodies_drop(snapshot_ids: Sequence[Any]) -> int:
    """Drop these snapshots' bodies, keeping their rows; return how many were dropped.

    Locks the rows FOR UPDATE, then stores every kept delta built on one of them as a
    keyframe (its decoded body does not change), then drops: no delta is left without its
    base, and a writer choosing one of them as a base waits for the lock and then sees it
    gone. Bodies already dropped or not written are left alone.
    """
    ids = [as_uuid(i) for i in snapshot_ids]
    if not ids:
        return 0
    with transaction.atomic():
        locked = list(
            ProjectionSnapshot.objects.filter(
                pk__in=ids, body_state__in=[State.STORED, State.REBUILT]
            )
            .order_by("pk")
            .select_for_update()
            .values_list("pk", flat=True)
        )
        if not locked:
            return 0
        dependents = list(
            ProjectionSnapshot.objects.filter(body_base__in=locked, body_encoding=Encoding.DELTA)
            .exclude(pk__in=locked)
            .order_by("pk")
            .select_for_update()
            .values_list("pk", flat=True)
        )
        for dependent in dependents:
            tokens = tokens_of(dependent, {})
            key = body_codec.encode_key(tokens)
            ProjectionSnapshot.objects.filter(pk=dependent).update(
                body=key,
                body_encoding=Encoding.KEY,
                body_base=None,
                body_depth=0,
                body_bytes=len(key),
            )
        return ProjectionSnapshot.objects.filter(pk__in=locked).update(
            body=None,
            body_encoding=Encoding.NONE,
            body_base=None,
            body_depth=0,
            body_state=State.DROPPED,
            body_bytes=0,
        )


def lost_bodies(older_than: datetime, limit: int = 200) -> list[ProjectionSnapshot]:
    """Snapshots whose body was still not written at `older_than` (their process died)."""
    return list(
        ProjectionSnapshot.objects.filter(
            body_state=State.PENDING, created_at__lt=older_than
        ).order_by("created_at")[:limit]
    )


def expired_bodies(older_than: datetime, limit: int = 500) -> list[UUID]:
    """Snapshots with a body from before `older_than` that the state at R can rebuild."""
    return list(
        ProjectionSnapshot.objects.filter(
            body_state__in=[State.STORED, State.REBUILT],
            created_at__lt=older_than,
            revision__gte=models.F("session__kv_history_from"),
        )
        .order_by("created_at")
        .values_list("pk", flat=True)[:limit]
    )


def body_mark_lost(snapshot_id: Any, note: str) -> bool:
    """A body that was never written and cannot be rebuilt: say so on the snapshot."""
    with transaction.atomic():
        rows = ProjectionSnapshot.objects.filter(pk=snapshot_id, body_state=State.PENDING)
        found = rows.select_for_update().values_list("notes", flat=True).first()
        if found is None:
            return False
        return rows.update(body_state=State.DROPPED, notes=[*(found or []), note]) == 1
