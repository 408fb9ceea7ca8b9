"""`manage.py replay_sessions`: what would another protocol version have shown and cost?

Rebuilds every recorded turn of one session (`--session ID`), or of the newest N sessions of
an AgentVersion (`--agent-version ID --last N`), under `--protocol id@version` and
`--options JSON` (validated like publish options), without calling a model and without
writing anything (sessions_app/replay.py). Prints per turn and in total, recorded beside
replayed: the request's tokens in its own wire format, and for openai-chat and
anthropic-messages with prompt caching on the input tokens, cache hit ratio and effective
cost (the cache economy report's simulator, a turn every `--think-seconds`), plus the
provider usage the turns reported. Every token figure is an estimate and says so.

Without `--protocol` and `--options` each turn is rebuilt under its recorded version: every
request should then come out identical to the one sent (the `same` column).
"""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from contextproto.errors import ApplicationError
from sessions_app.cache_economy import DEFAULT_THINK_SECONDS
from sessions_app.replay import agent_version_sessions, replay_target, session_replay
from sessions_app.replay_report import (
    PROVIDER_NAMES,
    ReplayTotals,
    SessionReplay,
    TurnReplay,
    totals_rows,
)

COST_RULES = (
    "effective cost in input-token equivalents: uncached 1, cache read 0.1, cache write 1.25 "
    "on Anthropic (5 min), no write charge on OpenAI"
)


def _pct(value: float) -> str:
    return f"{100 * value:.0f}%"


def _yes_no(value: bool | None) -> str:
    return "-" if value is None else ("yes" if value else "no")


def turn_line(replay: SessionReplay, turn: TurnReplay, notes: dict[str, int]) -> str:
    """One turn: where it was, its request as sent and as rebuilt, both providers' economy.

    A note is numbered in `notes` (note -> number, filled as first met) and printed once."""
    head = (
        f"{turn.turn:>4} {turn.revision:>5} {turn.upper_bound:>5}  {turn.window_id[:14]:<14} "
        f"{turn.provider:<18} {turn.sent_tokens:>8,} "
    )
    if turn.skipped is not None:
        return head + f"{'-':>8}  {'-':<4} skipped: {turn.skipped}"
    line = head + f"{turn.replayed_tokens or 0:>8,}  {_yes_no(turn.request_identical):<4}"
    for provider, _name in PROVIDER_NAMES:
        recorded = replay.provider_turn(turn, provider, "recorded")
        replayed = replay.provider_turn(turn, provider, "replayed")
        hits = (
            f"{_pct(recorded.cache.cache_read_tokens / (recorded.cache.input_tokens or 1))}->"
            f"{_pct(replayed.cache.cache_read_tokens / (replayed.cache.input_tokens or 1))}"
        )
        costs = f"{round(recorded.cost * 1e6):,}->{round(replayed.cost * 1e6):,}"
        line += f" {hits:>10} {costs:>15}"
    usage = turn.usage
    line += (
        f"  {usage.input_tokens:,} ({usage.cache_read_tokens:,})" if usage is not None else "  -"
    )
    for note in turn.notes:
        line += f" [{notes.setdefault(note, len(notes) + 1)}]"
    return line


def header_line() -> str:
    columns = (
        f"{'turn':>4} {'rev':>5} {'U':>5}  {'window':<14} {'format':<18} {'sent':>8} "
        f"{'replayed':>8}  {'same':<4}"
    )
    for _provider, name in PROVIDER_NAMES:
        columns += f" {name + ' hit':>10} {name + ' cost':>15}"
    return columns + "  usage in (cache read)"


def totals_lines(totals: ReplayTotals, heading: str) -> list[str]:
    """Recorded beside replayed over the turns both sides cover."""
    lines = [
        f"{heading}: {totals.turns} turn(s) replayed, {totals.skipped} skipped",
        f"  {'':<36} {'recorded':>14} {'replayed':>14} {'change':>9}",
    ]
    lines += [f"  {a:<36} {b:>14} {c:>14} {d:>9}" for a, b, c, d in totals_rows(totals)]
    lines.append(f"  identical requests: {totals.identical} of {totals.turns}")
    if totals.usage is not None:
        u = totals.usage
        cost = f", cost {u.cost.normalize():f}" if u.cost is not None else " (no prices)"
        lines.append(
            f"  provider usage reported for {totals.usage_turns} turn(s): input {u.input_tokens:,} "
            f"(cache read {u.cache_read_tokens:,}, write {u.cache_write_tokens:,}), output "
            f"{u.output_tokens:,}{cost}"
        )
    else:
        lines.append("  provider usage: none reported for these turns")
    for number, (note, count) in enumerate(totals.notes.items(), start=1):
        lines.append(f"  [{number}] {count} turn(s): {note}")
    return lines


class Command(BaseCommand):
    help = (
        "Replay recorded sessions under another protocol version and options, without calling "
        "a model, and report tokens, cache hit ratio and effective cost beside what was sent."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        which = parser.add_mutually_exclusive_group(required=True)
        which.add_argument("--session", metavar="ID", help="Replay this session.")
        which.add_argument(
            "--agent-version", metavar="ID", help="Replay the newest sessions of this version."
        )
        parser.add_argument(
            "--last", type=int, default=10, metavar="N", help="With --agent-version: N sessions."
        )
        parser.add_argument(
            "--protocol",
            metavar="ID@VERSION",
            help="Target protocol version, e.g. unified@4 (default: as recorded).",
        )
        parser.add_argument(
            "--options",
            metavar="JSON",
            help="Target options as a JSON object, checked like publish options (default: the "
            "version's for its own protocol, else the target's defaults).",
        )
        parser.add_argument(
            "--think-seconds",
            type=float,
            default=DEFAULT_THINK_SECONDS,
            metavar="S",
            help=f"Seconds between turns for the cache TTLs (default {DEFAULT_THINK_SECONDS:g}).",
        )
        parser.add_argument(
            "--recorded-times",
            action="store_true",
            help="Use the turns' recorded times instead of --think-seconds.",
        )
        parser.add_argument(
            "--last-turns", type=int, metavar="N", help="Only the newest N turns of a session."
        )
        parser.add_argument("--format", choices=("text", "json"), default="text")

    def handle(self, *args: Any, **options: Any) -> None:
        target_options: object = None
        if options["options"] is not None:
            try:
                target_options = json.loads(options["options"])
            except ValueError as exc:
                raise CommandError(f"--options is not JSON: {exc}.") from exc
        think = None if options["recorded_times"] else options["think_seconds"]
        try:
            if options["session"]:
                replays = [
                    session_replay(
                        session_id=options["session"],
                        protocol=options["protocol"],
                        options=target_options,
                        think_seconds=think,
                        last_turns=options["last_turns"],
                    )
                ]
            else:
                version, sessions = agent_version_sessions(
                    agent_version_id=options["agent_version"], last=options["last"]
                )
                target = replay_target(
                    version, protocol=options["protocol"], options=target_options
                )
                replays = [
                    session_replay(
                        session_id=session.pk,
                        target=target,
                        think_seconds=think,
                        last_turns=options["last_turns"],
                    )
                    for session in sessions
                ]
        except ApplicationError as exc:
            problems = exc.details.get("errors") or []
            listed = "".join(f"\n  {p['field']}: {p['message']} ({p['code']})" for p in problems)
            raise CommandError(f"{exc.code}: {exc.message}{listed}") from exc
        if options["format"] == "json":
            body = {
                "sessions": [r.to_wire() for r in replays],
                "totals": ReplayTotals.of(replays).to_wire(),
            }
            self.stdout.write(json.dumps(body, indent=2, ensure_ascii=False))
            return
        self._text(replays, think)

    def _text(self, replays: list[SessionReplay], think: float | None) -> None:
        if not replays:
            self.stdout.write("No session to replay.")
            return
        timing = "the turns' recorded times" if think is None else f"a turn every {think:g} s"
        first = replays[0]
        self.stdout.write(
            f"Estimates: tokens counted with {first.tokenizer}; every turn rebuilt for "
            f"openai-chat and anthropic-messages with prompt caching on, {timing}; {COST_RULES}. "
            "No model was called and nothing was written."
        )
        for replay in replays:
            target = replay.target
            where = "as recorded"
            if target.protocol is not None:
                options = json.dumps(dict(target.options or {}), separators=(",", ":"))
                where = f"under {target.label} {options}"
            shown = (
                f"the newest {len(replay.turns)} of {replay.turns_total}"
                if replay.turns_total > len(replay.turns)
                else str(len(replay.turns))
            )
            self.stdout.write(
                f"\n== session {replay.session_id} ({replay.recorded_protocol}): {shown} "
                f"turn(s) replayed {where}"
            )
            self.stdout.write(header_line())
            notes: dict[str, int] = {}
            for turn in replay.turns:
                self.stdout.write(turn_line(replay, turn, notes))
            for line in totals_lines(replay.totals(), "Totals"):
                self.stdout.write(line)
        if len(replays) > 1:
            self.stdout.write("")
            for line in totals_lines(ReplayTotals.of(replays), f"All {len(replays)} sessions"):
                self.stdout.write(line)
