"""The snapshot body sweep (issue 33, contract §4.6a): bodies still not written
SNAPSHOT_BODY_GRACE_SECONDS after their row (their process died between the turn's two
commits) are rebuilt from the state at R and the log through U and written, marked so; bodies
older than SNAPSHOT_BODY_RETENTION_DAYS are dropped. Readers rebuild a missing body on their
own either way; the sweep saves them doing it again."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from sessions_app.models import ProjectionSnapshot
from sessions_app.services.rebuild import snapshot_rebuild
from sessions_app.store import body_retention, body_writer

logger = logging.getLogger(__name__)

REBUILT_NOTE = (
    "body rebuilt by the sweeper from the state at revision {revision} and the log through "
    "index {bound}: the process of the turn ended before writing it ({match})"
)
LOST_NOTE = "body never written and not rebuildable: {problem}"


@dataclass(frozen=True)
class BodySweep:
    rebuilt: int = 0
    lost: int = 0
    dropped: int = 0


def _match(snapshot: ProjectionSnapshot, matches: bool | None) -> str:
    if matches is None:
        return "no request hash recorded to compare"
    return "its request hash matches the turn's" if matches else "its request hash DIFFERS"


def bodies_rebuild_lost() -> tuple[int, int]:
    """Write, rebuilt, the bodies still missing past the grace period; (rebuilt, lost)."""
    before = timezone.now() - timedelta(seconds=settings.SNAPSHOT_BODY_GRACE_SECONDS)
    rebuilt = lost = 0
    for snapshot in body_retention.lost_bodies(before):
        view = snapshot_rebuild(snapshot)
        if view.problem is not None:
            lost += body_retention.body_mark_lost(
                snapshot.pk, LOST_NOTE.format(problem=view.problem)
            )
            continue
        note = REBUILT_NOTE.format(
            revision=snapshot.revision,
            bound=snapshot.upper_bound,
            match=_match(snapshot, view.hash_matches),
        )
        written = body_writer.body_store(
            body_writer.body_encode(snapshot, view.body),
            state=ProjectionSnapshot.BodyState.REBUILT,
            note=note,
        )
        if written:
            rebuilt += 1
            logger.warning("snapshot %s: %s", snapshot.pk, note)
    return rebuilt, lost


def bodies_drop_expired() -> int:
    """Drop the bodies older than the retention period (none when it is unset)."""
    days = settings.SNAPSHOT_BODY_RETENTION_DAYS
    if days is None:
        return 0
    before = timezone.now() - timedelta(days=days)
    dropped = 0
    while True:
        batch = body_retention.expired_bodies(before)
        if not batch:
            return dropped
        done = body_retention.bodies_drop(batch)
        dropped += done
        if not done:
            return dropped


def snapshot_body_sweep() -> BodySweep:
    """One pass of the periodic body sweep."""
    rebuilt, lost = bodies_rebuild_lost()
    return BodySweep(rebuilt=rebuilt, lost=lost, dropped=bodies_drop_expired())
