"""Prefix compression jobs (contract §6), by concern:

* `jobs` — the job row and its fence (frozen revision, source hash, lease token): request,
  plan, pages and commit, shared by both kinds of maintainer.
* `external` — the external maintainer's API (plan for a host; a job by id).
* `worker` — the built-in worker: claim with a lease, heartbeat, execute, re-queue.
* `summariser` — the maintainer Agent's prompt and provider call.
* `sweeps` — the periodic sweep and the trigger after a turn.

The names below are the package's API; callers import them from here.
"""

from __future__ import annotations

from sessions_app.maintenance.external import job_for, maintenance_external_plan
from sessions_app.maintenance.jobs import (
    JobFailed,
    LeaseLost,
    maintainer_bound_check,
    maintenance_commit,
    maintenance_page,
    maintenance_plan,
    maintenance_request,
)
from sessions_app.maintenance.sweeps import maintenance_sweep, maintenance_trigger_after_turn
from sessions_app.maintenance.worker import (
    ExecuteOutcome,
    maintenance_execute,
    maintenance_lease_renew,
)

__all__ = [
    "ExecuteOutcome",
    "JobFailed",
    "LeaseLost",
    "job_for",
    "maintainer_bound_check",
    "maintenance_commit",
    "maintenance_execute",
    "maintenance_external_plan",
    "maintenance_lease_renew",
    "maintenance_page",
    "maintenance_plan",
    "maintenance_request",
    "maintenance_sweep",
    "maintenance_trigger_after_turn",
]
