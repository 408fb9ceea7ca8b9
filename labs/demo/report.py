"""The demo's report (`manage.py demo`): input tokens per turn beside the full history, the cost
once the provider caches, and the admin pages worth opening. Token counts are estimates
(characters / 4 of each request as sent), labelled as such; the cache figures come from
`sessions_app/cache_economy.py` (every turn rebuilt for openai-chat and anthropic-messages with
caching on, cl100k_base counts).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from contextproto.economics.cache_report import CacheEconomy
from contextproto.economics.causes import CAUSE_APPEND
from contextproto.protocol.adapters import PROVIDER_ANTHROPIC_MESSAGES, PROVIDER_OPENAI_CHAT
from sessions_app.admin_views import url
from sessions_app.cache_economy import DEFAULT_THINK_SECONDS, session_cache_economy
from sessions_app.models import ProjectionSnapshot, Session
from sessions_app.providers.base import canonical_json
from sessions_app.reads import raw_log
from sessions_app.store.snapshot_bodies import views_of

ESTIMATE = "estimates: characters / 4 of each request as sent, not a real tokenizer"
# The full history is the prefix@2 agent's log: the same work, without context tools.
FULL_HISTORY_OF = "prefix@2"
FULL_HISTORY = "full history"
CACHED_PROVIDERS = ((PROVIDER_OPENAI_CHAT, "OpenAI"), (PROVIDER_ANTHROPIC_MESSAGES, "Anthropic"))

Write = Callable[[str], Any]


def summary(results: dict[str, dict[str, Any]], full: list[int], write: Write) -> None:
    """Input tokens per turn of every agent beside the full history, and what each did."""
    unified, prefix = results["unified@2"], results["prefix@2"]
    columns = {label: r["tokens"] for label, r in results.items()}
    columns[FULL_HISTORY] = full
    turns = len(unified["tokens"])
    if any(len(tokens) != turns for tokens in columns.values()):
        counts = ", ".join(f"{k} {len(v)}" for k, v in columns.items())
        raise RuntimeError(f"the twins diverged: {counts} turns")
    after_commit = {c["turn"] + 1 for c in unified["commits"]}
    shown = sorted({1, turns, *range(10, turns + 1, 10), *after_commit} & set(range(1, turns + 1)))
    windows = [s.window_id for s in unified["snapshots"]]
    widths = {label: max(10, len(label)) for label in columns}

    def row(first: str, second: str, cells: dict[str, str]) -> str:
        return f"{first:>5}  {second:<16} " + " ".join(
            f"{cells[label]:>{widths[label]}}" for label in columns
        )

    write(f"\nInput tokens per turn ({ESTIMATE})")
    write(row("turn", "unified@2 window", {k: k for k in columns}))
    for turn in shown:
        i = turn - 1
        note = "  <- first view after a checkpoint" if turn in after_commit else ""
        cells = {k: f"{v[i]:,}" for k, v in columns.items()}
        write(row(str(turn), windows[i], cells) + note)
    write(row("total", f"{turns} turns", {k: f"{sum(v):,}" for k, v in columns.items()}))
    write(row("/turn", "", {k: f"{sum(v) // turns:,}" for k, v in columns.items()}))
    u, p = sum(unified["tokens"]), sum(prefix["tokens"])
    write(
        f"unified@2 sent {100 - round(100 * u / p)}% fewer input tokens than "
        f"prefix@2 and {100 - round(100 * u / sum(full))}% fewer than the full history "
        f"over the {turns} turns (estimates). Full history: every raw message up to the "
        f"turn, sent every turn ({FULL_HISTORY_OF}'s log, no compression)."
    )
    triggers = ", ".join(
        f"{c['job'].window_id} at turn {c['turn']} ({c['job'].trigger})" for c in unified["commits"]
    )
    opened = {s for s in windows if s != "main"}
    write(
        f"unified@2: {len(opened)} task windows (one resumed), {unified['folds']} folds, "
        f"{len(unified['commits'])} checkpoints written by the worker: {triggers or 'none'}."
    )
    for label, other in results.items():
        if label in ("unified@2", FULL_HISTORY_OF):
            continue
        sent = sum(other["tokens"])
        opened = {s.window_id for s in other["snapshots"] if s.window_id != "main"}
        change = round(100 * sent / u) - 100
        write(
            f"{label} sent {sent:,} input tokens over the same {turns} turns: "
            f"{abs(change)}% {'more' if change > 0 else 'fewer'} than unified@2 (estimates); "
            f"{len(opened)} task windows, {other['folds']} folds, "
            f"{len(other['commits'])} checkpoints written by the worker."
        )
    write(
        f"prefix@2: one window, no folds, {len(prefix['commits'])} checkpoints written by "
        "the worker."
    )


def cache_summary(results: dict[str, dict[str, Any]], write: Write) -> None:
    """What each agent and the full history cost once the provider caches."""
    economies: dict[str, CacheEconomy] = {}
    for label, result in results.items():
        report = session_cache_economy(
            result["session"].id, full_history=label == FULL_HISTORY_OF, view=label
        )
        economies[label] = report.view
        if report.full_history is not None:
            economies[FULL_HISTORY] = report.full_history
    full = economies.pop(FULL_HISTORY)
    economies[FULL_HISTORY] = full
    tokenizer = full.tokenizer
    write(
        f"\nCost with prompt caching ({tokenizer}; every turn's request rebuilt for "
        f"openai-chat and anthropic-messages with caching on, a turn every "
        f"{DEFAULT_THINK_SECONDS:g} s; effective cost in input-token equivalents: "
        "uncached 1, cache read 0.1, cache write 1.25 on Anthropic, no write charge on "
        "OpenAI)"
    )
    header = f"{'view':<14} {'tokens':>11}"
    for _provider, name in CACHED_PROVIDERS:
        header += f"  {name + ': hit':>14} {'cost':>10} {'vs full':>7}"
    write(header)
    for label, economy in economies.items():
        line = f"{label:<14} {economy[PROVIDER_ANTHROPIC_MESSAGES].totals.input_tokens:>11,}"
        for provider, _name in CACHED_PROVIDERS:
            p = economy[provider]
            share = p.cost / full[provider].cost
            line += (
                f"  {f'{100 * p.hit_ratio:.0f}%':>14} {round(p.equivalent_tokens):>10,} "
                f"{f'{100 * share:.0f}%':>7}"
            )
        write(line)
    write(
        "tokens: input tokens of the anthropic-messages requests; hit: cache-read / input "
        "tokens; vs full: share of the full history's effective cost under the same rules."
    )
    for label, economy in economies.items():
        breaks = [
            f"{b.cause} {b.pairs} ({b.rebilled_tokens:,})"
            for b in economy[PROVIDER_ANTHROPIC_MESSAGES].breaks
            if b.cause != CAUSE_APPEND
        ]
        write(
            f"Cache breaks, {label} (Anthropic rules; turn pairs, tokens re-billed): "
            + (", ".join(breaks) or "none, every turn appends")
            + "."
        )
    unified = economies["unified@2"]
    for label, other in economies.items():
        if label in ("unified@2", FULL_HISTORY_OF, FULL_HISTORY):
            continue
        write(
            f"{label} beside unified@2 with caching on: "
            + " and ".join(
                f"{100 * other[p].cost / unified[p].cost:.0f}% of its cost on {name} "
                f"(hit ratio {100 * other[p].hit_ratio:.0f}% vs "
                f"{100 * unified[p].hit_ratio:.0f}%)"
                for p, name in CACHED_PROVIDERS
            )
            + " (estimates)."
        )
    sent = unified[PROVIDER_ANTHROPIC_MESSAGES].totals.input_tokens
    share = sent / full[PROVIDER_ANTHROPIC_MESSAGES].totals.input_tokens
    write(
        f"unified@2 sends {100 * share:.0f}% "
        "of the full history's input tokens; once both cache it pays "
        + " and ".join(
            f"{100 * unified[p].cost / full[p].cost:.0f}% of its cost on {name}"
            for p, name in CACHED_PROVIDERS
        )
        + " (estimates)."
    )


def pages(
    base_url: str,
    unified: dict[str, Any],
    prefix: dict[str, Any],
    others: list[dict[str, Any]],
    gateway: dict[str, Any],
    write: Write,
) -> None:
    """The admin pages worth opening, with their addresses."""
    session, snapshots = unified["session"], unified["snapshots"]
    showcase = showcase_snapshot(session)
    lines = [
        ("session browser, unified@2", url("overview", session)),
        ("input tokens chart", url("overview", session) + "#input-tokens"),
    ]
    if showcase is not None:
        lines.append(("a turn with a fold and a checkpoint", url("snapshot", session, showcase.pk)))
        folded = first_view_with_fold(snapshots, showcase)
        if folded is not None:
            lines.append(
                ("the turn its fold was made (diff)", url("snapshot_diff", session, folded.pk))
            )
    if unified["commits"]:
        # Turn N's worker commit shows in the view of turn N + 1 (snapshots[N]).
        turn = unified["commits"][0]["turn"]
        if turn < len(snapshots):
            after = snapshots[turn]
            lines.append(
                ("the turn after a checkpoint (diff)", url("snapshot_diff", session, after.pk))
            )
    for other in others:
        lines.append((f"session browser, {other['label']}", url("overview", other["session"])))
    lines.append(("session browser, prefix@2", url("overview", prefix["session"])))
    lines.append(("session browser, through the gateway", url("overview", gateway["session"])))
    write("\nLook inside (admin, login below):")
    for label, path in lines:
        write(f"  {label:<37} {base_url}{path}")


def full_history_tokens(session: Session, snapshots: list[ProjectionSnapshot]) -> list[int]:
    """Per turn: the turn's request with every raw message up to its bound (estimate).

    Computed incrementally from the sizes of the messages' JSON (the same characters / 4 a
    direct `estimate_tokens(canonical_json(request))` gives), so a long story stays linear.
    """
    if not snapshots:
        return []
    last = max(s.upper_bound for s in snapshots)
    history = raw_log.log_page(session.id, window_id=None, after_index=0, limit=last)
    keep = ("role", "content", "toolName", "toolCallId", "arguments")
    sizes = [0]
    for message in history:
        wire = {k: v for k, v in message.to_wire().items() if k in keep}
        sizes.append(sizes[-1] + len(canonical_json(wire)))
    views_of(snapshots)
    heavy = {s.pk: s for s in snapshots}
    tokens = []
    for snapshot in snapshots:
        loaded = heavy[snapshot.pk]
        request = {k: v for k, v in loaded.request.items() if k != "system"}
        request["messages"] = [loaded.messages[0]] if loaded.messages else []
        base = len(canonical_json(request))
        n = min(snapshot.upper_bound, len(history))
        # "[system]" becomes "[system, m1, ..., mn]": each message adds ", " and its JSON.
        tokens.append(-(-(base + sizes[n] + 2 * n) // 4))
    return tokens


def first_view_with_fold(
    snapshots: list[ProjectionSnapshot], showcase: ProjectionSnapshot
) -> ProjectionSnapshot | None:
    """The first turn whose view holds the showcase's (last) fold: the turn it was made."""
    fold_ids = [
        s.get("foldId") for s in showcase.sources or [] if s.get("derivedType") == "context_fold"
    ]
    if not fold_ids:
        return None
    for snapshot in snapshots:
        if any(s.get("foldId") == fold_ids[-1] for s in snapshot.sources or []):
            return snapshot
    return None


def showcase_snapshot(session: Session) -> ProjectionSnapshot | None:
    """The latest turn whose view holds a fold and a checkpoint of its window."""
    candidates = (
        ProjectionSnapshot.objects.filter(session=session)
        .order_by("-created_at", "-pk")
        .only("id", "body_state", "created_at", "session_id", "request_hash")
    )
    for snapshot in candidates:
        kinds = {s.get("derivedType") for s in snapshot.sources or []}
        if "context_fold" not in kinds:
            continue
        header = next(
            (m for m in snapshot.messages or [] if m.get("kind") == "context_header"), None
        )
        if header and '"current_window_checkpoint": null' not in str(header.get("content")):
            return snapshot
    return None
