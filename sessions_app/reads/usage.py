"""Usage and cost totals (contract §8): one aggregate query each, whatever the number of turns.

Sums the snapshots' usage columns (see ProjectionSnapshot) over a session, some runs or an
agent version. Turns without reported usage are not counted. A cost is null when the
version has no usable prices, and 0 when it has prices but no turn was reported yet.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any
from uuid import UUID

from django.db.models import Count, QuerySet, Sum

from agents.models import AgentVersion
from contextproto.usage import TokenUsage, UsageWire, prices_problems, usage_to_wire
from sessions_app.models import GatewayExchange, ProjectionSnapshot, Session

SUMS = {
    "input": Sum("input_tokens"),
    "cache_read": Sum("cache_read_input_tokens"),
    "cache_write": Sum("cache_write_input_tokens"),
    "output": Sum("output_tokens"),
    "cost": Sum("cost"),
    "turns": Count("pk"),
}


@dataclass(frozen=True)
class UsageTotals:
    tokens: TokenUsage
    cost: Decimal | None
    turns: int

    def to_wire(self) -> UsageWire:
        return usage_to_wire(self.tokens, self.cost, self.turns)


def priced(prices: Any) -> bool:
    """Whether `prices` price turns (set and valid)."""
    return prices is not None and not prices_problems(prices)


def _totals(row: Mapping[str, Any], prices: Any) -> UsageTotals:
    cost = None
    if priced(prices):
        cost = Decimal(row["cost"]) if row["cost"] is not None else Decimal(0)
    return UsageTotals(
        tokens=TokenUsage(
            input_tokens=int(row["input"] or 0),
            output_tokens=int(row["output"] or 0),
            cache_read_input_tokens=int(row["cache_read"] or 0),
            cache_write_input_tokens=int(row["cache_write"] or 0),
        ),
        cost=cost,
        turns=int(row["turns"] or 0),
    )


def _reported(snapshots: QuerySet[ProjectionSnapshot]) -> QuerySet[ProjectionSnapshot]:
    return snapshots.filter(input_tokens__isnull=False)


def session_usage(session: Session) -> UsageTotals:
    """The session's reported turns summed (one query; the version is the session's)."""
    row = _reported(ProjectionSnapshot.objects.filter(session=session)).aggregate(**SUMS)
    return _totals(row, session.agent_version.prices)


def session_side_usage(session: Session) -> UsageTotals:
    """The session's side requests summed (contract §19.1 `sideUsage`; `turns` counts the
    requests): one query."""
    row = GatewayExchange.objects.filter(
        session=session, side=True, input_tokens__isnull=False
    ).aggregate(**SUMS)
    return _totals(row, session.agent_version.prices)


def agent_version_usage(version: AgentVersion) -> UsageTotals:
    """Every reported turn of every session of the version summed (one query)."""
    row = _reported(
        ProjectionSnapshot.objects.filter(session__agent_version_id=version.pk)
    ).aggregate(**SUMS)
    return _totals(row, version.prices)


def run_usage(run_ids: Iterable[UUID], prices: Any) -> dict[UUID, UsageTotals]:
    """Totals per run of the given runs of one version (one grouped query); runs with no
    reported turn are absent."""
    ids = list(run_ids)
    if not ids:
        return {}
    rows = (
        _reported(ProjectionSnapshot.objects.filter(run_id__in=ids))
        .values("run_id")
        .annotate(**SUMS)
        .order_by()
    )
    return {row["run_id"]: _totals(row, prices) for row in rows}


def totals_of(row: Mapping[str, Any], prices: Any) -> UsageTotals:
    """Totals from one row of SUMS (an aggregate or a grouped row) at `prices`."""
    return _totals(row, prices)
