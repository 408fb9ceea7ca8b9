"""The operator dashboard's reads (issue 27): a fixed number of aggregate queries.

Each function is one query (two for the cost table), a range scan on an index of migration
0013 whatever the size of the tables: runs started in the last day, runs in progress, the
maintenance queue, the last hour's failures (at most LIST_LIMIT rows each) and today's
reported turns. `scope` is None for a superuser, else the ids of the user's Applications.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from django.db.models import Count, Min, Q, QuerySet, Sum
from django.db.models.functions import Coalesce
from django.utils import timezone

from agents.models import AgentVersion, Application
from sessions_app.models import (
    GatewayExchange,
    MaintenanceJob,
    ProjectionSnapshot,
    Run,
    Session,
    ToolReceipt,
)
from sessions_app.reads.usage import SUMS, UsageTotals, totals_of

LIST_LIMIT = 10
VERSIONS_LISTED = 50
IN_PROGRESS = (Run.Status.QUEUED, Run.Status.RUNNING, Run.Status.WAITING_FOR_HOST_TOOL)

Scope = list[Any] | None  # Application ids


@dataclass(frozen=True)
class Moments:
    """The dashboard's time windows, all from one `now`."""

    now: datetime
    hour: datetime
    day: datetime
    today: datetime  # midnight of today in the current time zone

    @classmethod
    def at(cls, now: datetime | None = None) -> Moments:
        now = now or timezone.now()
        midnight = timezone.localtime(now).replace(hour=0, minute=0, second=0, microsecond=0)
        return cls(now, now - timedelta(hours=1), now - timedelta(days=1), midnight)


@dataclass(frozen=True)
class RunActivity:
    """Runs started in the last hour and day by status, and the sessions they ran in."""

    by_status: list[dict[str, Any]]  # {status, hour, day}, every status, catalog order
    sessions_hour: int
    sessions_day: int
    sessions_created_hour: int
    sessions_created_day: int
    in_progress: dict[str, int]  # runs now queued / running / waiting, whatever their age


@dataclass(frozen=True)
class MaintenanceQueue:
    queued: int
    running: int
    failed_hour: int
    failed_day: int
    oldest_waiting: datetime | None


@dataclass(frozen=True)
class Failures:
    """The last hour's error receipts and failed runs, newest first (at most LIST_LIMIT)."""

    receipts: list[ToolReceipt]
    receipts_more: bool
    runs: list[Run]
    runs_more: bool


@dataclass(frozen=True)
class VersionCost:
    version: AgentVersion
    totals: UsageTotals


@dataclass(frozen=True)
class GatewayAnswers:
    """Gateway answers of one client API, status and code (`ok` for a reply) (contract §14)."""

    api: str
    status: int | None
    code: str
    hour: int
    day: int


@dataclass(frozen=True)
class GatewayActivity:
    """Gateway requests (contract §14) of the last hour and day: all, refused or failed (a 4xx or
    5xx answer), answered from a stored reply; and the day's answers by client API, status and
    code (refused keys and unknown paths under /gateway/ included, for those who see every
    Application)."""

    requests_hour: int
    requests_day: int
    errors_hour: int
    errors_day: int
    replays_hour: int
    replays_day: int
    # Conversations in progress that nothing named: each started a session of its own.
    unnamed_hour: int = 0
    unnamed_day: int = 0
    answers: tuple[GatewayAnswers, ...] = ()


@dataclass(frozen=True)
class Dashboard:
    moments: Moments
    activity: RunActivity
    maintenance: MaintenanceQueue
    failures: Failures
    costs: list[VersionCost] = field(default_factory=list)
    gateway: GatewayActivity | None = None
    sessions: list[Session] = field(default_factory=list)


def member_scope(user: Any) -> Scope:
    """None for a superuser (everything), else the ids of the user's Applications (one query)."""
    if user.is_superuser:
        return None
    return list(Application.objects.filter(members=user).values_list("pk", flat=True))


def _scoped(queryset: QuerySet, scope: Scope, path: str) -> QuerySet:
    return queryset if scope is None else queryset.filter(**{f"{path}__in": scope})


def run_activity(scope: Scope, at: Moments) -> RunActivity:
    """Runs by status over the last hour and day, sessions active and started (three queries)."""
    recent = _scoped(Run.objects.filter(created_at__gte=at.day), scope, "session__application_id")
    counts: dict[str, Any] = {}
    for status in Run.Status:
        counts[f"{status.value}_hour"] = Count(
            "pk", filter=Q(status=status.value, created_at__gte=at.hour)
        )
        counts[f"{status.value}_day"] = Count("pk", filter=Q(status=status.value))
    row = recent.aggregate(
        **counts,
        sessions_hour=Count("session_id", distinct=True, filter=Q(created_at__gte=at.hour)),
        sessions_day=Count("session_id", distinct=True),
    )
    created = _scoped(Session.objects.filter(created_at__gte=at.day), scope, "application_id")
    started = created.aggregate(
        hour=Count("pk", filter=Q(created_at__gte=at.hour)), day=Count("pk")
    )
    live = _scoped(Run.objects.filter(status__in=IN_PROGRESS), scope, "session__application_id")
    in_progress = dict.fromkeys((s.value for s in IN_PROGRESS), 0)
    for status, count in live.values_list("status").annotate(n=Count("pk")).order_by():
        in_progress[status] = count
    return RunActivity(
        by_status=[
            {
                "status": status.value,
                "hour": row[f"{status.value}_hour"],
                "day": row[f"{status.value}_day"],
            }
            for status in Run.Status
        ],
        sessions_hour=row["sessions_hour"],
        sessions_day=row["sessions_day"],
        sessions_created_hour=started["hour"],
        sessions_created_day=started["day"],
        in_progress=in_progress,
    )


def maintenance_queue(scope: Scope, at: Moments) -> MaintenanceQueue:
    """Jobs queued and running, failed lately, and the oldest waiting one (one query)."""
    jobs = MaintenanceJob.objects.filter(
        Q(status__in=MaintenanceJob.ACTIVE_STATUSES)
        | Q(status=MaintenanceJob.Status.FAILED, updated_at__gte=at.day)
    )
    queued = Q(status=MaintenanceJob.Status.QUEUED)
    failed = Q(status=MaintenanceJob.Status.FAILED)
    row = _scoped(jobs, scope, "session__application_id").aggregate(
        queued=Count("pk", filter=queued),
        running=Count("pk", filter=Q(status=MaintenanceJob.Status.RUNNING)),
        failed_hour=Count("pk", filter=failed & Q(updated_at__gte=at.hour)),
        failed_day=Count("pk", filter=failed),
        oldest=Min("created_at", filter=queued),
    )
    return MaintenanceQueue(
        queued=row["queued"],
        running=row["running"],
        failed_hour=row["failed_hour"],
        failed_day=row["failed_day"],
        oldest_waiting=row["oldest"],
    )


def recent_failures(scope: Scope, at: Moments) -> Failures:
    """The last hour's error receipts and failed runs, newest first (two queries)."""
    receipts = list(
        _scoped(
            ToolReceipt.objects.filter(success=False, created_at__gte=at.hour),
            scope,
            "session__application_id",
        )
        .only(
            "session_id", "tool_call_id", "tool_name", "result_message_id", "created_at", "result"
        )
        .order_by("-created_at")[: LIST_LIMIT + 1]
    )
    runs = list(
        _scoped(
            Run.objects.filter(status=Run.Status.FAILED, finished_at__gte=at.hour),
            scope,
            "session__application_id",
        )
        .only("session_id", "status", "turns", "error", "created_at", "finished_at")
        .order_by("-finished_at")[: LIST_LIMIT + 1]
    )
    return Failures(
        receipts=receipts[:LIST_LIMIT],
        receipts_more=len(receipts) > LIST_LIMIT,
        runs=runs[:LIST_LIMIT],
        runs_more=len(runs) > LIST_LIMIT,
    )


def costs_today(scope: Scope, at: Moments) -> list[VersionCost]:
    """Tokens and cost of today's reported turns by AgentVersion, costliest first (two
    queries). Costs are per version: each is in the currency its version is priced in."""
    turns = _scoped(
        ProjectionSnapshot.objects.filter(created_at__gte=at.today, input_tokens__isnull=False),
        scope,
        "session__application_id",
    )
    rows = list(turns.values("session__agent_version_id").annotate(**SUMS).order_by())
    versions = AgentVersion.objects.select_related("agent__application").in_bulk(
        [row["session__agent_version_id"] for row in rows]
    )
    costs = [
        VersionCost(version, totals_of(row, version.prices))
        for row in rows
        if (version := versions.get(row["session__agent_version_id"])) is not None
    ]
    costs.sort(
        key=lambda c: (c.totals.cost or Decimal(0), c.totals.tokens.input_tokens), reverse=True
    )
    return costs[:VERSIONS_LISTED]


GATEWAY_ANSWERS_LISTED = 12


def gateway_activity(scope: Scope, at: Moments) -> GatewayActivity:
    """Gateway requests of the last hour and day, their errors and replays, and the day's
    answers by client API, status and code (two queries)."""
    recent = _scoped(
        GatewayExchange.objects.filter(created_at__gte=at.day), scope, "application_id"
    )
    hour = Q(created_at__gte=at.hour)
    error = Q(http_status__gte=400)
    replay = Q(replayed=True)
    unnamed = Q(warning="new-session")
    row = recent.aggregate(
        requests_hour=Count("pk", filter=hour),
        requests_day=Count("pk"),
        errors_hour=Count("pk", filter=hour & error),
        errors_day=Count("pk", filter=error),
        replays_hour=Count("pk", filter=hour & replay),
        replays_day=Count("pk", filter=replay),
        unnamed_hour=Count("pk", filter=hour & unnamed),
        unnamed_day=Count("pk", filter=unnamed),
    )
    kinds = (
        recent.values("client_format", "http_status", "error_code")
        .annotate(hour=Count("pk", filter=hour), day=Count("pk"))
        .order_by("-day", "client_format", "http_status", "error_code")[:GATEWAY_ANSWERS_LISTED]
    )
    answers = tuple(
        GatewayAnswers(
            api=k["client_format"],
            status=k["http_status"],
            code=k["error_code"] or "ok",
            hour=k["hour"],
            day=k["day"],
        )
        for k in kinds
    )
    return GatewayActivity(**row, answers=answers)


def latest_sessions(scope: Scope) -> list[Session]:
    """The newest sessions (at most LIST_LIMIT), each with its version and agent (one query,
    the `session_created` index): the dashboard links each to its browser."""
    return list(
        _scoped(Session.objects.all(), scope, "application_id")
        .select_related("agent_version__agent", "application")
        .only(
            "id",
            "created_at",
            "via_gateway",
            "active_window",
            "application__name",
            "agent_version__number",
            "agent_version__agent__name",
        )
        .order_by("-created_at", "-id")[:LIST_LIMIT]
    )


def dashboard(user: Any, now: datetime | None = None) -> Dashboard:
    """Everything the dashboard shows for `user`: at most twelve queries (eleven for a
    superuser), whatever the data."""
    scope = member_scope(user)
    at = Moments.at(now)
    return Dashboard(
        moments=at,
        activity=run_activity(scope, at),
        maintenance=maintenance_queue(scope, at),
        failures=recent_failures(scope, at),
        costs=costs_today(scope, at),
        gateway=gateway_activity(scope, at),
        sessions=latest_sessions(scope),
    )


@dataclass(frozen=True)
class SnapshotStorage:
    """What one Application's snapshot bodies take (issue 33): bytes stored against the bytes
    of the views' JSON, and the bodies by state. `unknown` counts bodies stored before their
    sizes were recorded (their stored bytes are counted, their JSON bytes are not)."""

    application_id: Any
    application: str
    snapshots: int
    stored_bytes: int
    view_bytes: int
    deltas: int
    keyframes: int
    pending: int
    rebuilt: int
    dropped: int
    unknown: int

    @property
    def ratio(self) -> float | None:
        return (
            self.view_bytes / self.stored_bytes if self.stored_bytes and self.view_bytes else None
        )


def snapshot_storage(scope: Scope) -> list[SnapshotStorage]:
    """Snapshot body storage per Application the user sees, largest first (one query)."""
    rows = _scoped(ProjectionSnapshot.objects.all(), scope, "session__application_id")
    states = ProjectionSnapshot.BodyState
    found = (
        rows.values("session__application_id", "session__application__name")
        .annotate(
            snapshots=Count("pk"),
            total_stored=Coalesce(Sum("body_bytes"), 0),
            total_view=Coalesce(Sum("view_bytes"), 0),
            deltas=Count("pk", filter=Q(body_encoding=ProjectionSnapshot.BodyEncoding.DELTA)),
            keyframes=Count("pk", filter=Q(body_encoding=ProjectionSnapshot.BodyEncoding.KEY)),
            pending=Count("pk", filter=Q(body_state=states.PENDING)),
            rebuilt=Count("pk", filter=Q(body_state=states.REBUILT)),
            dropped=Count("pk", filter=Q(body_state=states.DROPPED)),
            unknown=Count("pk", filter=Q(view_bytes__isnull=True, body__isnull=False)),
        )
        .order_by("-total_stored", "session__application__name")
    )
    return [
        SnapshotStorage(
            application_id=row["session__application_id"],
            application=row["session__application__name"],
            snapshots=row["snapshots"],
            stored_bytes=row["total_stored"],
            view_bytes=row["total_view"],
            deltas=row["deltas"],
            keyframes=row["keyframes"],
            pending=row["pending"],
            rebuilt=row["rebuilt"],
            dropped=row["dropped"],
            unknown=row["unknown"],
        )
        for row in found
    ]
