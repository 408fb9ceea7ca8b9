"""The calls a lower service layer makes into a higher one, installed at start-up.

Services import only downwards (docs/architecture.md). Where a lower layer must still set
higher-level work going — queue a Celery task, re-queue the run waiting for a host tool
result, queue the maintenance a protocol tool asked for — it calls a hook declared here;
`SessionsAppConfig.ready` installs each one from the layer above. A hook that was never
installed raises, so a process that skipped app loading fails loudly instead of dropping
the work.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.core.exceptions import ImproperlyConfigured


class Hook:
    """One call into a higher layer, named for what the caller needs done."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._target: Callable[..., Any] | None = None

    def install(self, target: Callable[..., Any]) -> None:
        self._target = target

    @property
    def installed(self) -> bool:
        return self._target is not None

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self._target is None:
            raise ImproperlyConfigured(
                f"service hook {self.name} is not installed (SessionsAppConfig.ready does it)"
            )
        return self._target(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<Hook {self.name} {'installed' if self.installed else 'not installed'}>"


# (run_id: str, countdown: int | None = None) -> None: advance the run in a worker, now or
# after `countdown` seconds. Callers enqueue after commit themselves.
run_advance_enqueue = Hook("run_advance_enqueue")

# (job_id: str) -> None: one attempt of a built-in maintenance job in a worker.
maintenance_job_enqueue = Hook("maintenance_job_enqueue")

# (*, session_id) -> bool: a host tool_result was written; re-queue the run that waited for
# it once no call is left unanswered. Called inside the write's transaction, session locked.
host_tool_result_written = Hook("host_tool_result_written")

# (*, session_id, window_id, trigger) -> (job, created): queue built-in maintenance of a
# window (the `queue_maintenance` effect of a protocol tool, after its dispatch commits).
maintenance_request = Hook("maintenance_request")

# (snapshot: ProjectionSnapshot) -> SnapshotView: decode a snapshot's body through the one
# decoder (store/snapshot_bodies.py; a hook because the model's `view` calls it).
snapshot_view = Hook("snapshot_view")

# (snapshot: ProjectionSnapshot) -> SnapshotView: rebuild a snapshot's body from the state at
# R and the log through U (sessions_app/replay.py), for a body dropped or never written.
snapshot_rebuild = Hook("snapshot_rebuild")

ALL = (
    run_advance_enqueue,
    maintenance_job_enqueue,
    host_tool_result_written,
    maintenance_request,
    snapshot_view,
    snapshot_rebuild,
)
