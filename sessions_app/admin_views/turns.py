"""Reads of the run timeline, the snapshot list's "what the model did next", live refresh.

A run's timeline is its projections in order, each followed by what the log records after
it: the model's answer (text, tool calls), the calls' results with the dispatch receipts,
and how long each step took. A message belongs to the turn of the newest projection of
the run frozen before it was written (its index is above that projection's upper bound).

Bounded reads: one page of the run's snapshots (keyset by creation time), one read of the
log range those turns cover (at most TIMELINE_MESSAGES rows), one read of the receipts of
the page's calls. The snapshot list reads the few messages just above each listed
snapshot's bound in one query.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any
from uuid import UUID

from django.core.exceptions import ValidationError
from django.db.models import Q
from django.http import HttpRequest
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from contextproto.pagination import split_page
from contextproto.protocol.messages import KIND_TOOL_CALL, KIND_TOOL_RESULT, RawMessage
from sessions_app.admin_views import presenters
from sessions_app.admin_views.common import (
    SNAPSHOT_HEAVY_FIELDS,
    pretty,
    preview,
    url,
)
from sessions_app.models import Message, ProjectionSnapshot, Run, Session, ToolReceipt
from sessions_app.reads import raw_log
from sessions_app.reads.usage import UsageTotals, run_usage
from sessions_app.services.runs import ACTIVE_RUN_STATUSES

TIMELINE_TURNS = 50
# Log rows one timeline page reads at most; a turn's steps beyond it are cut, and said so.
TIMELINE_MESSAGES = 1000
# How far above a snapshot's bound the snapshot list looks for the answer to that view
# (an answer is its text and its calls, written back to back).
ANSWER_LOOKAHEAD = 8
# A host-driven run has no end of its own: it counts as in progress while its host wrote
# to the log within this many seconds (docs/decisions.md "Live refresh").
HOST_IDLE_SECONDS = 600
LIVE_INTERVAL_MS = 3000


# ---------------------------------------------------------------- durations and timestamps


def _moment(value: str | datetime | None) -> datetime | None:
    if value is None or isinstance(value, datetime):
        return value
    return datetime.fromisoformat(value)


def _elapsed_ms(start: str | datetime | None, end: str | datetime | None) -> int | None:
    first, last = _moment(start), _moment(end)
    if first is None or last is None:
        return None
    return max(round((last - first).total_seconds() * 1000), 0)


def duration_text(ms: int | None) -> str:
    """`1.234 s` or `850 ms`; an em dash when not measured."""
    if ms is None:
        return "—"
    return f"{ms} ms" if ms < 1000 else f"{ms / 1000:.3f} s"


# ---------------------------------------------------------------- the run's timeline


@dataclass
class CallStep:
    call: RawMessage
    result: RawMessage | None = None
    receipt: ToolReceipt | None = None
    protocol: bool = False

    @property
    def outcome(self) -> str:
        if self.receipt is not None:
            if self.receipt.success:
                return "success"
            error = (self.receipt.result or {}).get("error") or {}
            return str(error.get("code") or "error")
        if self.result is None:
            return "pending"
        return "error" if self.result.is_error else "success"

    @property
    def ok(self) -> bool:
        return self.outcome == "success"

    @property
    def duration(self) -> str:
        """The dispatch's own time for a protocol tool; the host's, call to result, else."""
        if self.receipt is not None:
            return duration_text(self.receipt.duration_ms)
        if self.result is not None:
            return duration_text(_elapsed_ms(self.call.created_at, self.result.created_at))
        return "—"

    @property
    def duration_label(self) -> str:
        if self.receipt is not None:
            return "dispatch"
        return "host, call to result" if self.result is not None else ""

    @property
    def arguments(self) -> str:
        arguments = self.call.arguments
        # Text that is no JSON object was stored as the model wrote it (contract §5.2).
        return preview(arguments if isinstance(arguments, str) else pretty(arguments or {}), 600)


@dataclass
class Turn:
    number: int
    snapshot: ProjectionSnapshot | None
    snapshot_url: str | None = None
    diff_url: str | None = None
    texts: list[RawMessage] = field(default_factory=list)
    calls: list[CallStep] = field(default_factory=list)
    others: list[RawMessage] = field(default_factory=list)
    answered_after_ms: int | None = None

    @property
    def latency(self) -> str:
        if self.snapshot is None or self.snapshot.model_latency_ms is None:
            return "—"
        return duration_text(self.snapshot.model_latency_ms)

    @property
    def answered_after(self) -> str:
        return duration_text(self.answered_after_ms)

    @property
    def did(self) -> str:
        if self.calls:
            return ", ".join(step.call.tool_name or "?" for step in self.calls)
        return "answer" if self.texts else "no answer"


@dataclass
class Timeline:
    run: Run
    host_driven: bool
    client_api: str  # the client API of a gateway-driven run, as operators read it
    inputs: list[RawMessage]
    turns: list[Turn]
    more: bool
    truncated: bool
    next_cursor: str | None
    usage: UsageTotals | None


def timeline_cursor(request: HttpRequest) -> tuple[datetime, UUID] | None:
    raw = request.GET.get("after", "")
    stamp, _, raw_pk = raw.partition("|")
    try:
        moment = parse_datetime(stamp) if stamp else None
        pk = UUID(raw_pk) if raw_pk else None
    except (ValueError, ValidationError):
        return None
    return (moment, pk) if moment is not None and pk is not None else None


def run_timeline(
    session: Session, run: Run, *, after: tuple[datetime, UUID] | None, limit: int
) -> Timeline:
    """One page of the run's turns (oldest first, `after` a (created_at, pk) cursor)."""
    snapshots = ProjectionSnapshot.objects.filter(session=session, run=run).defer(
        *SNAPSHOT_HEAVY_FIELDS
    )
    before_page = 0
    if after is not None:
        at, pk = after
        earlier = Q(created_at__lt=at) | Q(created_at=at, pk__lte=pk)
        before_page = snapshots.filter(earlier).count()
        snapshots = snapshots.exclude(earlier)
    read = list(snapshots.order_by("created_at", "pk")[: limit + 1])
    found, more = split_page(read, limit)
    # The page's last turn ends where the next page's first begins.
    following_bound = read[limit].upper_bound if more else None
    inputs: list[RawMessage] = []
    if after is None:
        inputs = raw_log.log_run_inputs(session.id, run.id.hex, session.last_index)
    if after is None and inputs:
        start = inputs[0].index - 1
    elif found:
        start = found[0].upper_bound
    else:
        start = session.last_index
    through = following_bound if following_bound is not None else session.last_index
    span = max(through - start, 0)
    log = (
        raw_log.log_page(
            session.id, window_id=None, after_index=start, limit=min(span, TIMELINE_MESSAGES)
        )
        if span
        else []
    )
    truncated = span > TIMELINE_MESSAGES
    run_hex = run.id.hex
    mine = [m for m in log if m.run_id == run_hex or m.input_run == run_hex]
    turns = [
        Turn(
            number=before_page + position + 1,
            snapshot=snapshot,
            snapshot_url=url("snapshot", session, snapshot.pk),
            diff_url=url("snapshot_diff", session, snapshot.pk),
        )
        for position, snapshot in enumerate(found)
    ]
    head: list[RawMessage] = []
    calls: dict[str, CallStep] = {}
    for message in mine:
        turn = _turn_of(turns, message.index)
        if turn is None:
            if message.kind != "input" or after is not None:
                head.append(message)
            continue
        if message.role == "assistant" and message.kind == "text":
            turn.texts.append(message)
        elif message.kind == KIND_TOOL_CALL:
            step = CallStep(call=message)
            calls[message.tool_call_id or message.id] = step
            turn.calls.append(step)
        elif message.kind == KIND_TOOL_RESULT and message.tool_call_id in calls:
            calls[message.tool_call_id].result = message
        else:
            turn.others.append(message)
        if message.role == "assistant" and turn.answered_after_ms is None and turn.snapshot:
            turn.answered_after_ms = _elapsed_ms(turn.snapshot.created_at, message.created_at)
    if calls:
        receipts = ToolReceipt.objects.filter(session=session, tool_call_id__in=list(calls))
        for receipt in receipts:
            answered = calls.get(receipt.tool_call_id)
            if answered is not None:
                answered.receipt = receipt
                answered.protocol = True
    last = found[-1] if found and more else None
    return Timeline(
        run=run,
        host_driven=session.agent_version.model_provider == "external",
        client_api=presenters.client_api_title(run.client_api) if run.via_gateway else "",
        inputs=inputs + head,
        turns=turns,
        more=more,
        truncated=truncated,
        next_cursor=f"{last.created_at.isoformat()}|{last.pk}" if last else None,
        usage=run_usage([run.id], session.agent_version.prices).get(run.id),
    )


def _turn_of(turns: list[Turn], index: int) -> Turn | None:
    """The turn of the newest projection whose bound is below `index` (turns in order)."""
    chosen = None
    for turn in turns:
        if turn.snapshot is not None and turn.snapshot.upper_bound < index:
            chosen = turn
        else:
            break
    return chosen


# ---------------------------------------------------------------- the snapshot list


@dataclass
class SnapshotRow:
    snapshot: ProjectionSnapshot
    number: int
    did: str
    answer_url: str | None
    href: str
    diff_href: str
    run_href: str | None
    host_driven: bool = False

    @property
    def latency(self) -> str:
        """The runtime's provider call; "host" when the host calls its own model."""
        if self.host_driven and self.snapshot.model_latency_ms is None:
            return "host"
        return duration_text(self.snapshot.model_latency_ms)


def snapshot_rows(session: Session, found: list[ProjectionSnapshot]) -> list[SnapshotRow]:
    """The listed snapshots (newest first) with their turn number and the answer to each.

    The turn number of a snapshot is its position in the session (1 = the first
    projection): the listed ones are consecutive, so one count of the older ones gives all.
    The answer: the assistant messages written right after the snapshot's bound that do
    not name another view (one query for the whole page).
    """
    if not found:
        return []
    oldest = found[-1]
    before = (
        ProjectionSnapshot.objects.filter(session=session)
        .filter(
            Q(created_at__lt=oldest.created_at) | Q(created_at=oldest.created_at, pk__lt=oldest.pk)
        )
        .count()
    )
    ranges = Q()
    for snapshot in found:
        bound = snapshot.upper_bound
        ranges |= Q(index__gt=bound, index__lte=bound + ANSWER_LOOKAHEAD)
    after = {
        row[0]: row
        for row in Message.objects.filter(session=session)
        .filter(ranges)
        .values_list("index", "role", "kind", "tool_name", "snapshot_id", "id")
    }
    host_driven = session.agent_version.model_provider == "external"
    rows = []
    last = len(found) - 1
    for position, snapshot in enumerate(found):
        names: list[str] = []
        answered = False
        first_id = None
        index = snapshot.upper_bound + 1
        while index in after and index <= snapshot.upper_bound + ANSWER_LOOKAHEAD:
            _i, role, kind, tool_name, named, message_id = after[index]
            if role != "assistant" or (named is not None and named != snapshot.pk):
                break
            first_id = first_id or message_id
            if kind == KIND_TOOL_CALL:
                names.append(tool_name or "?")
            else:
                answered = True
            index += 1
        if names:
            did = ", ".join(names) + (" (with text)" if answered else "")
        elif answered:
            did = "answer"
        elif snapshot.upper_bound + 1 not in after and snapshot.upper_bound >= session.last_index:
            did = "pending"
        else:
            did = "no answer"
        rows.append(
            SnapshotRow(
                snapshot=snapshot,
                number=before + (last - position) + 1,
                did=did,
                answer_url=url("message", session, first_id) if first_id else None,
                href=url("snapshot", session, snapshot.pk),
                diff_href=url("snapshot_diff", session, snapshot.pk),
                run_href=url("run", session, snapshot.run_id) if snapshot.run_id else None,
                host_driven=host_driven,
            )
        )
    return rows


# ---------------------------------------------------------------- live refresh


def run_is_live(run: Run | None, *, latest_projection: datetime | None) -> bool:
    """Whether `run` is in progress: the runtime still works on it, or its host is active.

    A host-driven (`external`) run stays open until the next input; it counts as live
    while the host projected (or started the run) within HOST_IDLE_SECONDS. A host projects
    every turn, so `latest_projection`, the session's newest snapshot, tells (the pages read
    it anyway).
    """
    if run is None or run.status not in (*ACTIVE_RUN_STATUSES, Run.Status.EXTERNAL):
        return False
    if run.status != Run.Status.EXTERNAL:
        return True
    recent = max(filter(None, (latest_projection, run.created_at)))
    return timezone.now() - recent < timedelta(seconds=HOST_IDLE_SECONDS)


def latest_projection_at(session: Session) -> datetime | None:
    """When the session's newest snapshot was built (one index read)."""
    return (
        ProjectionSnapshot.objects.filter(session=session)
        .order_by("-created_at")
        .values_list("created_at", flat=True)
        .first()
    )


def live_context(live: bool) -> dict[str, Any]:
    return {"live": live, "live_interval_ms": LIVE_INTERVAL_MS}


def timeline_cost(timeline: Timeline) -> Decimal | None:
    return timeline.usage.cost if timeline.usage is not None else None
