"""Replay report (issue 28): the demo's sessions rebuilt under another protocol version.

Runs `manage.py demo` (its unified@2, unified@4 and prefix@2 agents work through the same
story with the scripted model), then replays the sessions this run created without calling a
model (sessions_app/replay.py): the unified@2 session under unified@4 (its defaults), the
same session back under unified@2 (as recorded: every request must come out as sent), and
the prefix@2 session as recorded. "Back" is the unified@2 session replayed under the version
it ran; the demo's own unified@4 agent is not replayed here (the demo's summary shows it).
Prints the totals table and, with `--write`, puts it in BENCHMARKS.md between its markers
(bench/run.py keeps the section when it rewrites the file).

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/contextproto_bench \\
        .venv/bin/python bench/bench_replay.py [--write]

Any database the project runs on will do (the figures do not depend on it); it must be
migrated (`manage.py migrate`). The demo adds its Application and agents, or new versions of
them, and resets the demo admin's password, as `make demo` does.
"""

from __future__ import annotations

import argparse
import io
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import benchlib

SECTION = benchlib.Section("<!-- replay:begin -->", "<!-- replay:end -->")
# (label, which demo session, target protocol or None for as recorded)
REPLAYS = (
    ("unified@2 -> unified@4", "unified@2", "unified@4"),
    ("unified@2 -> unified@2 (back: as recorded)", "unified@2", None),
    ("prefix@2 -> prefix@2 (as recorded)", "prefix@2", None),
)


def _setup() -> None:
    if str(benchlib.ROOT) not in sys.path:
        sys.path.insert(0, str(benchlib.ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "contextproto.settings")
    import django

    django.setup()


def _demo_sessions() -> dict[str, Any]:
    """Run the demo; return its new sessions by protocol (`unified@2`, `prefix@2`)."""
    from django.core.management import call_command

    from sessions_app.models import Session

    before = set(Session.objects.values_list("pk", flat=True))
    call_command("demo", stdout=io.StringIO())
    # The story's sessions (the demo's gateway conversation is a unified@2 session too).
    created = (
        Session.objects.exclude(pk__in=before)
        .exclude(via_gateway=True)
        .select_related("agent_version")
    )
    found = {s.agent_version.protocol_key: s for s in created}
    missing = {label for _, label, _ in REPLAYS} - set(found)
    if missing:
        sys.exit(f"bench: the demo created no {', '.join(sorted(missing))} session.")
    return found


def run() -> dict[str, Any]:
    from contextproto.protocol.adapters import (
        PROVIDER_ANTHROPIC_MESSAGES,
        PROVIDER_OPENAI_CHAT,
    )
    from sessions_app.cache_economy import DEFAULT_THINK_SECONDS
    from sessions_app.replay import session_replay

    benchlib.banner("Replay: the demo's sessions under another protocol version")
    started = time.perf_counter()
    sessions = _demo_sessions()
    demo_seconds = time.perf_counter() - started
    rows = []
    tokenizer = ""
    for label, which, target in REPLAYS:
        replay = session_replay(session_id=sessions[which].pk, protocol=target)
        totals = replay.totals()
        tokenizer = replay.tokenizer
        row: dict[str, Any] = {
            "label": label,
            "turns": totals.turns,
            "skipped": totals.skipped,
            "identical": totals.identical,
            "sent": totals.sent_tokens,
            "replayed": totals.replayed_tokens,
            "usage": totals.usage.input_tokens if totals.usage else None,
            "notes": dict(totals.notes),
        }
        for provider, name in (
            (PROVIDER_OPENAI_CHAT, "openai"),
            (PROVIDER_ANTHROPIC_MESSAGES, "anthropic"),
        ):
            row[name] = (totals.recorded[provider], totals.replayed[provider])
        rows.append(row)
        benchlib.log(f"{label}: {totals.turns} turns, {totals.identical} identical requests")
    from django.db import connection

    result = {
        "database": connection.vendor,
        "rows": rows,
        "tokenizer": tokenizer,
        "think": DEFAULT_THINK_SECONDS,
        "demo_seconds": demo_seconds,
        "seconds": time.perf_counter() - started,
    }
    print(render_table(result))
    return result


def _pair(before: str, after: str) -> str:
    return before if before == after else f"{before} -> {after}"


def render_table(r: dict[str, Any]) -> str:
    headers = [
        "replay",
        "turns",
        "identical requests",
        "request tokens, as sent -> replayed",
        "OpenAI: hit ratio",
        "OpenAI: effective cost",
        "Anthropic: hit ratio",
        "Anthropic: effective cost",
        "cost change (OpenAI / Anthropic)",
    ]
    lines = []
    for row in r["rows"]:
        cells = [
            row["label"],
            f"{row['turns']:,}",
            f"{row['identical']:,} / {row['turns']:,}",
            _pair(f"{row['sent']:,}", f"{row['replayed']:,}"),
        ]
        for name in ("openai", "anthropic"):
            recorded, replayed = row[name]
            cells += [
                _pair(f"{100 * recorded.hit_ratio:.1f}%", f"{100 * replayed.hit_ratio:.1f}%"),
                _pair(
                    f"{round(recorded.equivalent_tokens):,}",
                    f"{round(replayed.equivalent_tokens):,}",
                ),
            ]
        changes = []
        for name in ("openai", "anthropic"):
            recorded, replayed = row[name]
            before, after = recorded.equivalent_tokens, replayed.equivalent_tokens
            changes.append(f"{100 * (after - before) / before:+.1f}%" if before else "-")
        cells.append(" / ".join(changes))
        lines.append(cells)
    return benchlib.table(headers, lines)


def render_section(r: dict[str, Any]) -> str:
    forward = next(row for row in r["rows"] if row["label"].endswith("unified@4"))
    notes = "; ".join(f"{note} ({count} turns)" for note, count in forward["notes"].items())
    return "\n".join(
        [
            "## Replay: the demo under another protocol version (issue 28)",
            "",
            "`bench/bench_replay.py --write` runs `manage.py demo` (its unified@2, unified@4 "
            "and prefix@2 agents work through the story with the scripted model) and replays "
            "the unified@2 and prefix@2 sessions it created with `sessions_app/replay.py`, the "
            'code behind `manage.py replay_sessions` and the admin\'s "replay under…" pages: '
            "every recorded turn is rebuilt from the state at its revision and the raw log "
            "through its bound, under the target version, without calling a model. "
            '"Back" is the unified@2 session '
            "replayed under the version it ran, which must reproduce every request as sent "
            "(the demo's own unified@4 agent is not replayed here; the demo's summary shows "
            "it). Tokens: the request in its own wire format "
            "(the demo's are neutral), and for the cache figures every turn rebuilt for "
            f"openai-chat and anthropic-messages with prompt caching on, a turn every "
            f"{r['think']:g} s, counted with {r['tokenizer']}. Effective cost in input-token "
            "equivalents: uncached 1, cache read 0.1, cache write 1.25 on Anthropic (5 min), no "
            "write charge on OpenAI. All figures are estimates; recorded -> replayed.",
            "",
            render_table(r),
            "",
            f"unified@4 ran with its defaults (state message last in the user role, masking "
            f"older tool results); {notes or 'no assumption was needed'}. Demo "
            f"{r['demo_seconds']:.0f} s, replays {r['seconds'] - r['demo_seconds']:.0f} s "
            f"({r['database']} database).",
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--write", action="store_true", help="update BENCHMARKS.md")
    args = parser.parse_args()
    _setup()
    result = run()
    if args.write:
        path = benchlib.ROOT / "BENCHMARKS.md"
        SECTION.write(path, render_section(result))
        print(f"\nbench: wrote the replay section of {path}")
    print(f"bench: {result['seconds']:.1f} s")


if __name__ == "__main__":
    main()
