"""Targets of issues #8 and #13 and the BENCHMARKS.md text, written from one run's figures."""

from __future__ import annotations

import re
from typing import Any

from benchlib import goal_lines, median, ms

from contextproto.economics.cache_sim import anthropic_min_cacheable_tokens


def _met(ok: bool) -> str:
    return "met" if ok else "missed"


# Statements per turn and per dispatch when issue #13 was filed (BENCHMARKS.md at 4009c47,
# same bench code): the "before" column of the statements table.
STATEMENTS_BEFORE = {
    "projection_build": (9, "22.0 ms, 7.9x the bare read"),
    "context_fold_create": (22, "22.6 ms, 10.9x the bare transaction"),
    "context_window_open": (19, "13.1 ms, 6.2x the bare transaction"),
}


def targets(results: dict[str, Any]) -> list[dict[str, str]]:
    """The goals of issue #13, each measured in this run."""
    verdicts = []
    projection = results.get("projection")
    if projection:
        cells = projection["cells"]
        first, last = median(cells[0].projection), median(cells[-1].projection)
        verdicts.append(
            {
                "target": f"projection at {cells[-1].built.total:,} messages within 1.2x of "
                f"{cells[0].built.total:,}",
                "measured": f"{projection['scaling']:.2f}x ({ms(last):.1f} ms vs "
                f"{ms(first):.1f} ms, medians)",
                "status": _met(projection["scaling"] <= 1.2),
                "key": "scaling",
            }
        )
        verdicts.append(
            {
                "target": "projection read + build (all but the snapshot write) <= 2x the bare "
                "read of the same rows and KV",
                "measured": f"{projection['build_vs_bare_min']:.1f}x-"
                f"{projection['build_vs_bare']:.1f}x across sizes (median / median)",
                "status": _met(projection["build_vs_bare"] <= 2.0),
                "key": "build_vs_bare",
            }
        )
        verdicts.append(
            {
                "target": "projection with the snapshot write <= 3x the bare read",
                "measured": f"{projection['vs_bare_min']:.1f}x-{projection['vs_bare']:.1f}x "
                "across sizes (median / median)",
                "status": _met(projection["vs_bare"] <= 3.0),
                "key": "vs_bare",
            }
        )
    dispatch = results.get("dispatch")
    if dispatch:
        for tool in ("context_fold_create", "context_window_open"):
            rows = {s["clients"]: s for s in dispatch["summary"] if s["tool"] == tool}
            rows = {n: s for n, s in rows.items() if not s["contended"]}
            one = rows[1]["ratio"]
            verdicts.append(
                {
                    "target": f"dispatch of `{tool}`, one client, <= 3x the bare transaction",
                    "measured": f"{one:.1f}x (median latency)",
                    "status": _met(one <= 3.0),
                    "key": "dispatch",
                }
            )
            most = max(rows)
            grown = rows[most]["ratio"] / one
            verdicts.append(
                {
                    "target": f"`{tool}` at {most} clients on {most} sessions: ratio to bare "
                    "<= 2x its one-client value",
                    "measured": f"{grown:.2f}x ({rows[most]['ratio']:.1f}x vs {one:.1f}x)",
                    "status": _met(grown <= 2.0),
                    "key": "dispatch_scaling",
                }
            )
    return verdicts


def statements_table(results: dict[str, Any]) -> str:
    """Statements per turn / per dispatch: when issue #13 was filed and in this run."""
    from benchlib import table

    now: dict[str, tuple[int, str]] = {}
    if "projection" in results:
        cell = results["projection"]["cells"][0]
        total = median(cell.projection)
        now["projection_build"] = (
            cell.queries,
            f"{ms(total):.1f} ms, {total / median(cell.bare):.1f}x the bare read",
        )
    if "dispatch" in results:
        for part in results["dispatch"]["breakdown"]:
            now[part["tool"]] = (
                part["statements"],
                f"{ms(part['total']):.1f} ms, {part['total'] / part['bare']:.1f}x the bare "
                "transaction",
            )
    rows = [
        (path, before, was, *now.get(path, ("-", "not measured in this run")))
        for path, (before, was) in STATEMENTS_BEFORE.items()
    ]
    return table(
        ("path (1k session, one client)", "statements before", "then", "statements now", "now"),
        rows,
    )


def _scaling_note(results: dict[str, Any], verdict: dict[str, str]) -> str:
    cells = results["projection"]["cells"]
    rows = ", ".join(
        f"{c.built.total:,}: {ms(median(c.projection)):.1f} ms ({c.queries} statements, "
        f"SQL {ms(median(c.sql)):.1f} ms)"
        for c in cells
    )
    if verdict["status"] == "met":
        return (
            "Every size issues the same statements and reads the same rows through the "
            "(session, window, index), run-inputs and (session, window, first_index) fold "
            "indexes, so the cost does not follow the session's size: " + rows + "."
        )
    return (
        "The statements are the same at every size (" + rows + "), so the extra time is "
        "in the index probes of the larger session (more btree levels and pages not in "
        "shared_buffers). Check `EXPLAIN (ANALYZE, BUFFERS)` of the window query at the "
        "largest size; a larger shared_buffers or a covering index would fix a cache miss."
    )


def _vs_bare_note(results: dict[str, Any]) -> str:
    cell = results["projection"]["cells"][0]
    total = median(cell.projection)
    sql = median(cell.sql)
    insert = median(cell.snapshot_insert)
    write = median(cell.snapshot_write)
    engine = median(cell.engine)
    bare = median(cell.bare)
    glue = total - sql - engine - (write - insert)
    return (
        f"Where the time goes at {cell.built.total:,} messages: `projection_build` "
        f"{ms(total):.1f} ms against {ms(bare):.1f} ms for the bare read of the same "
        f"{cell.bare_rows} rows and {cell.bare_kv} KV values. {cell.queries} statements take "
        f"{ms(sql):.1f} ms of SQL, {ms(insert):.1f} ms of it the snapshot INSERT; encoding "
        f"the snapshot body (JSON + zlib, ~37 KiB) adds {ms(write - insert):.1f} ms, so the "
        f"whole snapshot write is {ms(write):.1f} ms; the engine, the adapter and `to_wire` "
        f"take {ms(engine):.1f} ms; the rest, {ms(glue):.1f} ms, is Python around them (the "
        "session lock and the host tools through the ORM, ~200 RawMessage objects built from "
        "the rows, the transaction). Issue #13 applied: the window, the run's inputs and the "
        "archive boundary in one plain SQL statement (`sessions_app/reads/hot_sql.py`), KV and "
        "folds in one each, no Run row read, and the snapshot as one compressed body instead "
        "of three jsonb documents (9 -> 6 statements). The bare read does none of the "
        "engine's work and writes nothing: the engine alone is "
        f"{engine / bare:.1f}x of it and the snapshot write {write / bare:.1f}x, so even with "
        f"every read as cheap as the bare one the turn would be "
        f"{(bare + engine + write) / bare:.1f}x. Going lower needs the snapshot body written "
        "off the turn's path (the frozen R/U/run row first, the body after the model call or "
        "by a worker) and the engine's own work made cheaper; both were left for later."
    )


def _dispatch_note(results: dict[str, Any]) -> str:
    parts = results["dispatch"]["breakdown"]
    described = "; ".join(
        f"`{p['tool']}` {ms(p['total']):.1f} ms: {p['statements']} statements, SQL "
        f"{ms(p['sql']):.1f} ms, COMMIT {ms(p['commit']):.1f} ms, Python "
        f"{ms(p['python']):.1f} ms (bare: {ms(p['bare']):.1f} ms, {p['bare_statements']} "
        "statements)"
        for p in parts
    )
    return (
        "Why (one client, sequential): " + described + ". The bare transaction only writes; "
        "the dispatcher must first read and check what contract §5.2 requires - the session row "
        "with its AgentVersion, the call and its answer (one query, hot or archived), the "
        "snapshot's frozen R/U with the message before the call (one statement: is this the "
        "answer's second call?), the KV the handler reads (its usual keys in one read), and "
        "for `context_fold_create` the outline of the live window (C, U] to rebuild its "
        "interaction groups plus three fold checks (endpoint windows, overlapping folds, "
        "the fold count). Handler and writes run in a savepoint so a failure becomes an "
        "error receipt (2 statements). Issue #13 applied: call and answer in one query, "
        "snapshot + predecessor in one, the outline in plain SQL, KV prefetch, one session "
        "row update, one statement for the KV limits (fold_create 22 -> 17 statements, "
        "window_open 19 -> 15). What is left is mostly Python: the engine's validation and "
        "the ORM writes (model instances, compiled INSERTs). 3x the bare transaction would "
        "need the whole dispatch in hand-written SQL like the bare one; we kept the ORM for "
        "the writes, where correctness (fencing, upserts, counters) lives. With "
        f"{results['dispatch']['worst_clients']} client threads in one interpreter the GIL "
        "adds queueing; the multi-process figures are in the load section (`make load`)."
    )


def _notes(results: dict[str, Any], verdicts: list[dict[str, str]]) -> list[str]:
    notes = []
    dispatch_noted = projection_noted = False
    for verdict in verdicts:
        if verdict["key"] == "scaling":
            body = _scaling_note(results, verdict)
        elif verdict["key"] in ("vs_bare", "build_vs_bare"):
            # One note for both projection targets, under the first one missed.
            if projection_noted or verdict["status"] == "met":
                continue
            projection_noted = True
            body = _vs_bare_note(results)
        elif verdict["key"] == "dispatch_scaling":
            if verdict["status"] == "met":
                continue
            body = (
                "The clients of this table are threads of one Python process: with 16 of them "
                "on 2 CPUs they queue for the interpreter lock, and the dispatcher holds it "
                "longer per operation than the bare transaction does, so its ratio grows with "
                "them (the figure moves between runs around 2x). A deployment runs several "
                "server processes; their scaling over HTTP is in the load section below."
            )
        else:
            if dispatch_noted or verdict["status"] == "met":
                continue
            dispatch_noted = True
            body = _dispatch_note(results)
        if not body:
            continue
        notes.append(f"**{verdict['target']} - {verdict['status']}.** {body}")
    return notes


def _contention(results: dict[str, Any]) -> str:
    rows = [s for s in results["dispatch"]["summary"] if s["contended"]]
    parts = []
    for row in rows:
        codes = ", ".join(f"{n} {c}" for c, n in sorted(row["codes"].items()))
        parts.append(f"`{row['tool']}`: {codes}")
    return (
        "Contended (4 clients, 1 session): all four calls of a round are generated from the "
        "same revision, so the session row lock serialises them, the first commits and the "
        "others are answered `context_state_stale` (a correctable error receipt): "
        + "; ".join(parts)
        + ". Their latency includes the wait for the lock."
    )


def render(results: dict[str, Any], verdicts: list[dict[str, str]], ctx: dict[str, Any]) -> str:
    m = ctx["machine"]
    total = ctx["total_seconds"]
    measured_by = (
        "`make bench`, from start to this file"
        if ctx["total_from_make"]
        else ("bench/run.py (without createdb/migrate)")
    )
    lines = [
        "# Benchmarks",
        "",
        "Projection and dispatch scaling against the physical limit, and the token economy "
        "(issues #8 and #13). Generated by `bench/run.py`; every figure below comes from the run "
        "described here - rerun `make bench` to refresh this file.",
        "",
        f"* Date: {ctx['started']}",
        f"* Command: `{ctx['command']}` (runs `createdb` if needed, `manage.py migrate`, then "
        f"`{ctx['expanded']}`)",
        f"* Total run time: {total / 60:.1f} min ({total:.0f} s, measured by {measured_by}); "
        "limit: 15 min on 2 cores",
        f"* Machine: {m['nproc']} CPUs (`nproc`), {m['cpu']}, {m['ram']} RAM, {m['os']}, "
        f"Python {m['python']}",
        f"* PostgreSQL: {m['postgres']}",
        f"* Load average (1/5/15 min) before / after: {ctx['load_before']} / "
        f"{ctx['load_after']} (other work on the machine shares the 2 CPUs; ratios are "
        "measured interleaved in the same run, so they are steadier than absolute times)",
        f"* Code: {ctx['git']}",
        "",
        "## Targets",
        "",
        "Performance goals from the issue, reported, not CI-gated.",
        "",
        "| target | measured | status |",
        "|:--|:--|:--|",
    ]
    for verdict in verdicts:
        lines.append(f"| {verdict['target']} | {verdict['measured']} | **{verdict['status']}** |")
    lines.append("")
    for note in _notes(results, verdicts):
        lines += [note, ""]
    lines += [
        "Statements per turn and per dispatch, when issue #13 was filed (BENCHMARKS.md at "
        "4009c47, same benchmark) and in this run:",
        "",
        statements_table(results),
        "",
    ]

    if "projection" in results:
        p = results["projection"]
        lines += [
            "## 1. Projection",
            "",
            '`projection_build(session_id=..., provider="openai-chat", use_cache=False)` on '
            "sessions of 1k, 10k, 100k and 1M messages over 50 windows, all showing the same "
            "view: the active window's 200 messages above its checkpoint (`coveredThrough` "
            "set with `kv_commit`), the current run's input from `main`, 4 folds of 3 groups "
            "(`fold/<id>` via `kv_commit`, which keeps FoldRecord), plus one folded exchange "
            "per 1000 hidden messages elsewhere. Data: `bench/bench_data.py` (seeded, COPY in "
            "batches of 10k, one transaction per session, `next_message_index` advanced, "
            f"reused when present). Median and p95 over {p['reps']} repetitions, sizes "
            'interleaved. "bare" is two raw SQL statements in one transaction returning '
            "exactly the view's rows (window range + current-run inputs) and KV values (view "
            "keys + folds of W above C via FoldRecord), jsonb decoded as the ORM does. "
            '"SQL ms" is time inside statements of projection_build (COMMIT excluded); '
            '"engine ms" is `project` + `adapt` + `to_wire`.',
            "",
            p["table"],
            "",
            f"Sessions {'reused' if p['reused'] else 'built'} in {p['prepare_seconds']:.1f} s; "
            f"section {p['seconds']:.1f} s.",
            "",
        ]
    if "dispatch" in results:
        d = results["dispatch"]
        lines += [
            "## 2. Dispatch",
            "",
            "`tool_dispatch` of `context_fold_create` (one finished lookup exchange of the "
            "active window) and `context_window_open` (a new window) on fresh 1k-message "
            "sessions of the same layout. Clients are threads, each with its own connection; "
            "per round every client writes its call (a snapshot row at the current revision, "
            "then `message_write`), waits at a barrier and dispatches - only the dispatch is "
            'timed; ops/s = dispatches / summed wall time of the dispatch phases. "bare" is '
            "one raw SQL transaction with the same writes: lock the session row FOR NO KEY "
            "UPDATE, upsert the KV rows and their FoldRecord/WindowRecord rows, insert the "
            "tool_result message and the receipt, update the session counters. Python threads "
            "share one interpreter (GIL) on 2 CPUs, so throughput flattens beyond 2 clients "
            "for both.",
            "",
            d["table"],
            "",
            _contention(results),
            "",
            "Where the time goes:",
            "",
            d["breakdown_table"],
            "",
            f"Section {d['seconds']:.1f} s.",
            "",
        ]
    if "tokens" in results:
        lines += token_section(results["tokens"])
    if "economy" in results:
        lines += economy_section(results["economy"], SECTION_HEADINGS["economy"])
    if "economy-long" in results:
        lines += economy_section(results["economy-long"], SECTION_HEADINGS["economy-long"])
    if "prototypes" in results:
        pr = results["prototypes"]
        lines += [
            "## Prototypes",
            "",
            "Candidate fixes for the missed targets, measured next to today's code path on "
            "the 1k projection session (`bench/bench_prototypes.py`). Writes are rolled back: "
            "the snapshot variants go to a TEMP table (no WAL, no indexes, so lower than the "
            "real INSERT measured in section 1 - compare the variants with each other), the "
            "window_open rows subtract the cost of creating the scratch session they write "
            "to. No application code was changed.",
            "",
            pr["table"],
            "",
            f"Snapshot payload: {pr['sizes']}.",
            "",
        ]
    if "engine" in results:
        lines += [
            "## Engine only",
            "",
            "`bench/bench_engine_projection.py --repeat 10`: the pure engine over an "
            "in-memory table that returns exactly the rows the view's `ReadPlan` asks for (no "
            "database). The time per turn follows the visible messages, not the session.",
            "",
            "```",
            results["engine"]["output"].rstrip(),
            "```",
            "",
        ]
    if "gateway" in results:
        import gateway_section

        lines += gateway_section.section_lines(results["gateway"])
    return "\n".join(lines)


def token_section(t: dict[str, Any]) -> list[str]:
    """Section 3: raw tokens per view, then the cost once the provider caches, and the goals."""
    cache = t["cache"]
    model = cache["models"]["anthropic-messages"]
    minimum, _source = anthropic_min_cacheable_tokens(model)
    lines = [
        "## 3. Token economy",
        "",
        "A 300-turn scripted session (`bench/bench_tokens.py`, scripted model, built-in "
        "runtime driven in-process with `RUNTIME_AUTOSTART=False`, maintenance inline): "
        "10 tasks, each in its own window (2 resumed later), 20 bulky host lookups per "
        "task (`scenario.host_result`, ~3 KB each), a fold every 5 lookups, a working "
        "memory, `context_maintainer_run` twice, window complete, answer in `main`. Every "
        "view of `scenario.PROTOCOL_VIEWS` runs it: unified@1, unified@2 and unified@3 with "
        "the state message trailing as assistant (A), before the history (B) and trailing "
        "as user (C), and unified@4 with its default options (masking: maskKeepRecent 6, "
        "maskMinChars 1000, maskStep 10; state message trailing as user) run the same "
        "script (its arguments cut to what each version's tools accept: unified@1 has no "
        "`expectedWindowId`); `unified@4 no folds` is unified@4 with the same defaults and "
        "an agent that never folds (a `progress_note` host call where the script folds), so "
        "the masking tier, not folds, shrinks its old lookups (`unified@2 no folds`: unified@2 "
        "with that agent, so the two differ by the layout and masking alone); prefix@2 gets "
        "the same inputs and "
        "the same lookups turn for turn (a tiny `progress_note` host call where a unified "
        "agent calls a context tool). All: maxInputTokens 16000, maintenance at 0.75, a "
        "scripted maintainer. Raw tokens are estimates (characters / 4 of the request as "
        "sent). The full history is what an append-only agent without context management "
        "would send: prefix@2's system prompt and tools and every raw message of its log "
        "up to the turn's bound (the same work without context tools).",
        "",
        "![input tokens per turn](bench/token_economy.svg)",
        "",
        "Every 10th turn (characters / 4):",
        "",
        t["table"],
        "",
        t["summary"],
        "",
        "### With prompt caching",
        "",
        "`sessions_app/cache_economy.py` loads every session's snapshots and rebuilds each "
        "turn's request for `openai-chat` and `anthropic-messages` with prompt caching on "
        "(`promptCache` auto, 5m: Anthropic breakpoints where the adapters put them, the "
        "session's `prompt_cache_key`) from the stored view (messages, sources and the "
        "tools its request carried); the full history goes through the same adapters, so "
        "its last raw block carries the sliding breakpoint. The requests are replayed "
        "through the cache simulator (`contextproto/economics/cache_sim.py`; OpenAI: "
        "prefixes from 1024 tokens in 128-token steps, kept 300 s; Anthropic: entries at "
        f"breakpoints, 20-block lookback, minimum {minimum:,} tokens for {model}, TTL 5 "
        f"min refreshed by reads) one turn every {cache['think_seconds']:g} s (the scripted "
        "turns run milliseconds apart; a real agent's turn takes a model answer and the "
        f"host's work), tokens counted with {cache['tokenizer']}. Hit ratio: cache-read / "
        "input tokens. Effective cost, in input-token equivalents: uncached x 1 + cache "
        "reads x 0.1 + cache writes x 1.25 (Anthropic, 5 min) or x 1 (OpenAI: no write "
        'charge, and none simulated); "vs full": share of the full history\'s cost under '
        "the same rules.",
        "",
        cache["table"],
        "",
        "Cache breaks by cause under Anthropic's rules (turn pairs / tokens re-billed: "
        "blocks after the first difference between consecutive requests whose content the "
        "previous request had already sent). A pair is `append only` when the request "
        "extends the previous one up to its trailing state message; `window switch` when "
        "the active window differs; `checkpoint` when messages of the active window left "
        "the view (its coverage moved); `header` when the header changed otherwise (task "
        "or window memory); `fold` when the first difference is a new fold or the first "
        "message it replaced; `state message` when a state message placed before the "
        "history changed; `masking` when unified@4's masking boundary moved a step (tool "
        "results became stubs); `history` for another change of the shown history (here: "
        "a new run drops the previous run's inputs that a checkpoint covers).",
        "",
        cache["breaks"],
        "",
        *_choice_lines(t),
        "Goals of issue 24 (reported, not CI-gated):",
        "",
        "| goal | measured | status |",
        "|:--|:--|:--|",
    ]
    for goal in cache["goals"]:
        lines.append(f"| {goal['target']} | {goal['measured']} | **{goal['status']}** |")
    lines.append("")
    for goal in cache["goals"]:
        if goal["status"] != "met":
            lines += [f"**{goal['target']} - {goal['status']}.** {goal['why']}", ""]
    lines += goal_lines(
        "Goals of issue 25, unified@4 (default options) against unified@2 (reported, not "
        "CI-gated):",
        cache.get("goals_unified4", []),
    )
    for note in cache.get("notes", []):
        lines += [note, ""]
    lines += [
        f"Section {t['seconds']:.1f} s (sessions driven {t['drive_seconds']:.1f} s, cache "
        f"replay of every view {t['replay_seconds']:.1f} s).",
        "",
    ]
    return lines


# Each section's heading in BENCHMARKS.md, for a run that refreshes only some of them.
SECTION_HEADINGS = {
    "projection": "## 1. Projection",
    "dispatch": "## 2. Dispatch",
    "tokens": "## 3. Token economy",
    "economy": "## 3b. Token economy at 128k: both agents, the providers' own strategies",
    "economy-long": "## 3c. Token economy over 1000 turns (`make bench-long`)",
    "prototypes": "## Prototypes",
    "engine": "## Engine only",
    "gateway": "## Gateway",
    # Written between its own markers by bench_snapshots.SECTION (bench/run.py does it).
    "snapshots": "## Snapshot storage (issue 33)",
}


def keep_sections(old: str, new: str, keys: list[str]) -> str:
    """`new` with the sections of `keys` that it lacks copied from `old` (before the load
    section, or at the end): a full `make bench` keeps what `make bench-long` measured."""
    text = new
    for key in keys:
        heading = SECTION_HEADINGS[key]
        if _section_span(text, heading) is not None:
            continue
        span = _section_span(old, heading)
        if span is None:
            continue
        block = old[span[0] : span[1]].rstrip("\n") + "\n\n"
        text = _insert_section(text, key, block)
    return text


def _insert_section(text: str, key: str, block: str) -> str:
    """`text` with `block` before the first later section of SECTION_HEADINGS it has (else
    before the load section, or at the end)."""
    keys = list(SECTION_HEADINGS)
    for later in keys[keys.index(key) + 1 :]:
        span = _section_span(text, SECTION_HEADINGS[later])
        if span is not None:
            return text[: span[0]] + block + text[span[0] :]
    at = text.find(LOAD_BEGIN)
    at = at if at >= 0 else len(text)
    return text[:at].rstrip("\n") + "\n\n" + block + text[at:]


LOAD_BEGIN = "<!-- make load: begin"
REFRESH_NOTE = "* Refreshed after this run:"


def _section_span(text: str, heading: str) -> tuple[int, int] | None:
    """Start and end of the section that starts with `heading` (up to the next `## `)."""
    start = text.find("\n" + heading + "\n")
    if start < 0:
        return None
    start += 1
    ends = [i for i in (text.find("\n## ", start + 1), text.find(LOAD_BEGIN, start)) if i >= 0]
    return start, (min(ends) + 1 if ends else len(text))


def refresh(old: str, results: dict[str, Any], ctx: dict[str, Any]) -> str:
    """`old` with the sections measured in `results` replaced by this run's, the rest kept.

    The header still describes the run that wrote the whole file; a line under it says
    which sections were measured again, when and how.
    """
    new = render(results, [], ctx)
    text = old
    headings = []
    for key in results:
        heading = SECTION_HEADINGS[key]
        span = _section_span(new, heading)
        if span is None:
            continue
        block = new[span[0] : span[1]].rstrip("\n") + "\n\n"
        headings.append(heading.removeprefix("## "))
        found = _section_span(text, heading)
        if found is not None:
            text = text[: found[0]] + block + text[found[1] :]
        else:
            text = _insert_section(text, key, block)
    if not headings:
        return old
    named = ", ".join(headings)
    note = (
        f"{REFRESH_NOTE} {named} on {ctx['started']} (`{ctx['expanded']}`, "
        f"{ctx['runner_seconds']:.0f} s, code {ctx['git']})"
    )
    # One note per set of sections: a later refresh of the same ones replaces it.
    text = re.sub(
        rf"^{re.escape(REFRESH_NOTE)} {re.escape(named)} on .*\n", "", text, flags=re.MULTILINE
    )
    code = re.search(r"^\* Code: .*\n", text, flags=re.MULTILINE)
    if code is not None:
        text = text[: code.end()] + note + "\n" + text[code.end() :]
    return text


BASELINE_NOTES = (
    "The providers' strategies are simulated on the full history (the agent that does not "
    "fold, without context tools), each request edited as the provider's documented rule "
    "says, then rebuilt through the same adapters, cache simulator and prices "
    "(`contextproto/economics/baselines.py`; the rule versions, defaults and the readings "
    "taken where the documentation is silent are in docs/decisions.md). Anthropic's context "
    "editing is stateless: the client sends the full history and every request over the "
    "trigger is edited again, so once it is active the newest result past the kept ones is "
    "cleared on every turn and the cache is rewritten from there. A compaction bills one "
    "extra call: the request as it stood plus a short summarization prompt (cache reads and "
    "writes as simulated) and the summary as output (assumed 2,000 tokens, priced at 5x "
    "input, Claude's output price). The ToolOutputTrimmer runs in the OpenAI Agents SDK "
    "before each call, on any provider. Every view of the service also shows a tool result "
    "of more than 16,000 characters as a preview (`TOOL_RESULT_PREVIEW_CHARS`), readable in "
    "full with `context_history_read` / `context_fold_read` under unified; the naive agent "
    "and the baselines send results whole."
)


def _choice_lines(t: dict[str, Any]) -> list[str]:
    """The comparison with the providers' strategies (issue 34) and its goals, if measured."""
    compared = t.get("compared")
    if not compared:
        return []
    lines = [
        "Views against the providers' own strategies (issue 34), Anthropic's rules unless a "
        'column says OpenAI; effective cost in input-token equivalents; "vs cheapest '
        "baseline\": against the cheapest provider strategy under Anthropic's rules "
        f"({compared['cheapest']}); checkpoints run: committed maintenance jobs (baselines: "
        "compactions); largest request: the most input tokens one request carried.",
        "",
        compared["table"],
        "",
        BASELINE_NOTES,
        "",
        "Rules simulated: "
        + "; ".join(f"{label}: `{rule}`" for label, rule in compared["rules"].items())
        + ".",
        "",
    ]
    lines += goal_lines(
        f"Goals of issue 34 at {t['setting']['title']} (reported, not CI-gated):",
        compared.get("goals", []),
    )
    return lines


def _sizes_line(sizes: dict[str, Any]) -> str:
    if not sizes:
        return ""
    return (
        f"Lookup results in this run: {sizes['count']}, median {sizes['median']:,} characters, "
        f"90th percentile {sizes['p90']:,}, largest {sizes['max']:,}; {sizes['under_2k']} under "
        f"2,000 characters, {sizes['over_20k']} of 20,000 or more."
    )


def economy_section(t: dict[str, Any], heading: str) -> list[str]:
    """Section 3b / 3c: a realistic setting, both agents, every view, the baselines."""
    setting = t["setting"]
    cache = t["cache"]
    chart = f"bench/token_economy_{setting['key']}.svg"
    lines = [
        heading,
        "",
        f"The script of section 3 at {setting['title']}: maxInputTokens "
        f"{setting['max_input_tokens']:,} (maintenance at 0.75 of it), tool results drawn "
        "per lookup from a seeded long-tailed distribution (`bench_tokens.lookup_chars`: 80% "
        "of 300-2,000 characters, 15% of 2,000-20,000, 5% of 20,000-60,000; every view gets "
        f"the same result for the same lookup), {setting['turns']} turns. Views: "
        f"{', '.join(setting['views'])}. A view marked `no folds` runs the agent that does not "
        "fold (the same work, a `progress_note` host call where the script folds), so old "
        "results are left to checkpoints and, under unified@4, to masking. "
        + _sizes_line(t.get("sizes") or {}),
        "",
        f"![input tokens per turn]({chart})",
        "",
        "Input tokens per turn (characters / 4):",
        "",
        t["table"],
        "",
        t["summary"],
        "",
        "With prompt caching (the replay of section 3, the same rules and prices):",
        "",
        cache["table"],
        "",
        "Cache breaks by cause under Anthropic's rules (turn pairs / tokens re-billed):",
        "",
        cache["breaks"],
        "",
        *_choice_lines(t),
        f"Section {t['seconds']:.1f} s (sessions driven {t['drive_seconds']:.1f} s, cache "
        f"replay of every view and baseline {t['replay_seconds']:.1f} s).",
        "",
    ]
    return lines
