"""Tokens an experiment spent, and its budget: what the provider reported, counted once.

`Tokens` sums model calls by kind; `Budget` is the experiment's token budget, charged with
every agent call and every maintainer call (a maintenance job's usage charged by its delta,
so a retried job is not counted twice); `group_cost` prices a group's calls (contract §8).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from contextproto.errors import EXPERIMENT_BUDGET_EXHAUSTED, ApplicationError
from contextproto.usage import TokenUsage, tokens_of, turn_cost
from labs.experiments.records import TokensWire
from sessions_app.models import MaintenanceJob, Session


class BudgetExhausted(ApplicationError):
    """Raised from the turn callback: the runtime fails the run with this code and stops."""

    def __init__(self, spent: int, budget: int) -> None:
        super().__init__(
            EXPERIMENT_BUDGET_EXHAUSTED,
            f"the experiment's token budget is spent ({spent} of {budget}); the run stops here.",
            {"spentTokens": spent, "budgetTokens": budget},
        )


@dataclass
class Tokens:
    """Tokens of model calls as the provider reported them (or estimated, and then said).

    `input` counts every input token, cache reads and writes included (contract §8);
    `cache_read` and `cache_write` are the parts of it the provider read from or wrote to
    its prompt cache.
    """

    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0
    calls: int = 0
    estimated_calls: int = 0

    def add(self, usage: dict[str, Any] | None) -> int:
        """Count one model call's usage; return the tokens it spent (input + output)."""
        usage = usage or {}
        # Lenient like the usage reports: missing counts are 0, cache counts fit the input.
        found = tokens_of(usage) or TokenUsage(0, 0)
        self.add_usage(found)
        self.estimated_calls += 1 if usage.get("estimated") else 0
        return found.input_tokens + found.output_tokens

    def add_usage(self, found: TokenUsage) -> None:
        """Count one model call's tokens by kind."""
        self.input += found.input_tokens
        self.output += found.output_tokens
        self.cache_read += found.cache_read_input_tokens
        self.cache_write += found.cache_write_input_tokens
        self.calls += 1

    def merge(self, other: Tokens) -> None:
        self.input += other.input
        self.output += other.output
        self.cache_read += other.cache_read
        self.cache_write += other.cache_write
        self.calls += other.calls
        self.estimated_calls += other.estimated_calls

    @property
    def usage(self) -> TokenUsage:
        return TokenUsage(
            input_tokens=self.input,
            output_tokens=self.output,
            cache_read_input_tokens=self.cache_read,
            cache_write_input_tokens=self.cache_write,
        )

    def to_dict(self, scripted: bool) -> TokensWire:
        if scripted:
            source = "scripted-estimate"
        elif self.estimated_calls:
            source = f"provider-reported; {self.estimated_calls} call(s) estimated (no usage sent)"
        else:
            source = "provider-reported"
        return {
            "input": self.input,
            "uncachedInput": self.usage.uncached_input_tokens,
            "cacheRead": self.cache_read,
            "cacheWrite": self.cache_write,
            "output": self.output,
            "total": self.input + self.output,
            "calls": self.calls,
            "source": source,
        }


def group_cost(
    tokens: Tokens, maintenance: Tokens, prices: dict[str, Any] | None
) -> dict[str, float] | None:
    """contract §8's cost of a group's model calls at the plan's prices; None without prices.

    The formula is linear in the token counts, so the cost of the summed calls is the sum
    of the calls' costs; uncached input is the input less cache reads and writes.
    """
    agent, upkeep = turn_cost(tokens.usage, prices), turn_cost(maintenance.usage, prices)
    if agent is None or upkeep is None:
        return None
    return {"agent": float(agent), "maintenance": float(upkeep), "total": float(agent + upkeep)}


@dataclass
class Budget:
    """The experiment's token budget and what is spent of it (input + output tokens)."""

    total: int
    spent: int = 0
    # Per maintenance job: the tokens already charged, and its usage by kind at that point.
    _charged_jobs: dict[str, int] = field(default_factory=dict)
    _charged_usage: dict[str, TokenUsage] = field(default_factory=dict)

    @property
    def exhausted(self) -> bool:
        return self.spent >= self.total

    def charge_maintenance(self, session: Session, tokens: Tokens) -> int:
        """Charge the maintainer's calls of `session` not yet charged; return the new tokens."""
        spent = 0
        for job_id, usage in MaintenanceJob.objects.filter(
            session=session, summarizer_usage__isnull=False
        ).values_list("id", "summarizer_usage"):
            usage = usage or {}  # the filter excludes NULL; the JSON type allows it
            total = int(usage.get("inputTokens", 0)) + int(usage.get("outputTokens", 0))
            before = self._charged_jobs.get(str(job_id), 0)
            if total > before:
                # One job may call the maintainer twice (a shorter retry), its usage summed
                # over both: charge the delta, by kind, so nothing is counted twice.
                self._charged_jobs[str(job_id)] = total
                current = tokens_of(usage) or TokenUsage(0, 0)
                previous = self._charged_usage.get(str(job_id)) or TokenUsage(0, 0)
                self._charged_usage[str(job_id)] = current
                tokens.add_usage(
                    TokenUsage(
                        input_tokens=current.input_tokens - previous.input_tokens,
                        output_tokens=current.output_tokens - previous.output_tokens,
                        cache_read_input_tokens=current.cache_read_input_tokens
                        - previous.cache_read_input_tokens,
                        cache_write_input_tokens=current.cache_write_input_tokens
                        - previous.cache_write_input_tokens,
                    )
                )
                spent += total - before
        self.spent += spent
        return spent
