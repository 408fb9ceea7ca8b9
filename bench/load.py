"""`make load`: concurrent host loops over HTTP against the production server, then an audit.

Each loop is one session driven the way an external host drives it (contract §12, §5.2): an
input; a projection and the model's answer sent to `turns/` (a protocol tool call: task
memory, a new window, or a fold of the previous host lookup, in turn, which the service
dispatches); a second projection and answer (a host tool call, handed back); its result. N
loops run at once against uvicorn with several worker processes on PostgreSQL + Redis, for a
bounded number of turns and seconds, on loopback only. Afterwards every session is audited
in the database (MessageIndex gapless, one result per call, one receipt per protocol call,
revision = the successful mutating receipts, every acknowledged write present and nothing
written twice), and every call is dispatched once more over HTTP, which must replay its
original receipt.

    make load                                         # 16 loops x 10 turns, 4 workers
    make load LOAD_ARGS="--sessions 32 --turns 20 --server-workers 2"
    DATABASE_URL=... REDIS_URL=... .venv/bin/python bench/load.py --help

Turns are keyed by their snapshot and body, writes carry a clientMessageId and dispatches
are keyed by their toolCallId, so a loop retries any request whose answer it did not get (a
dropped connection, 502/503/504, 429 after Retry-After) without writing twice. The fault
tests (tests/reliability/) drive the same loops and the same audit while they kill processes
under them.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import benchlib
import hostloops
from hostloops import Attempt, Audit, HttpClient, Server, Stats

ROOT = hostloops.ROOT
DEFAULT_DATABASE_URL = "postgres://postgres@127.0.0.1:5432/contextproto_load"
DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/8"


# --------------------------------------------------------------------------- report


def percentile(values: list[float], share: float) -> float:
    """Nearest-rank percentile."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[max(0, math.ceil(share * len(ordered)) - 1)]


def latency_rows(stats: Stats, wall: float) -> list[list[Any]]:
    by_endpoint: dict[str, list[Attempt]] = {}
    for attempt in stats.attempts:
        by_endpoint.setdefault(attempt.endpoint, []).append(attempt)
    rows = []
    for endpoint, attempts in sorted(by_endpoint.items()):
        answered = [a.seconds * 1000 for a in attempts if a.status is not None]
        rows.append(
            [
                endpoint,
                len(attempts),
                round(len(attempts) / wall, 1) if wall else float("nan"),
                percentile(answered, 0.50),
                percentile(answered, 0.95),
                percentile(answered, 0.99),
                max(answered) if answered else float("nan"),
                sum(1 for a in attempts if a.status is not None and a.status >= 500),
                sum(1 for a in attempts if a.status is None),
            ]
        )
    return rows


LATENCY_HEADERS = ["endpoint", "requests", "req/s", "p50 ms", "p95 ms", "p99 ms", "max ms"]
LATENCY_HEADERS += ["5xx", "no answer"]


class CpuMeter:
    """Share of the machine's CPU time spent busy (all processes) while the block ran."""

    @staticmethod
    def _read() -> tuple[int, int]:
        fields = [int(v) for v in Path("/proc/stat").read_text().split("\n")[0].split()[1:]]
        idle = fields[3] + fields[4]  # idle + iowait
        return sum(fields) - idle, sum(fields)

    def __enter__(self) -> CpuMeter:
        self.busy, self.total = self._read()
        self.started = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        busy, total = self._read()
        self.busy, self.total = busy - self.busy, total - self.total
        self.seconds = time.perf_counter() - self.started

    @property
    def share(self) -> float:
        return self.busy / self.total if self.total else float("nan")

    def cpu_ms(self) -> float:
        """Busy CPU milliseconds over all CPUs (clock ticks -> ms via the share)."""
        return self.share * self.seconds * (os.cpu_count() or 1) * 1000


def cpu_text(
    single: CpuMeter, single_requests: int, many: CpuMeter, many_requests: int, loops: int
) -> str:
    def part(meter: CpuMeter, requests: int) -> str:
        per = meter.cpu_ms() / requests if requests else float("nan")
        return f"{meter.share:.0%} of {os.cpu_count()} CPUs busy, {per:.1f} CPU-ms per request"

    alone = single.cpu_ms() / single_requests if single_requests else float("nan")
    together = many.cpu_ms() / many_requests if many_requests else float("nan")
    return (
        f"CPU (whole machine, from /proc/stat): one loop alone {part(single, single_requests)}; "
        f"{loops} loops {part(many, many_requests)}. The work per request - server, "
        f"PostgreSQL and client together - grows {together / alone:.2f}x from one loop to "
        f"{loops}: concurrency adds queueing for CPUs, not work (no shared lock: a dispatch "
        "locks only its own session's row)."
    )


def scaling_headers(loops: int) -> list[str]:
    return [
        "endpoint",
        "1 loop p50 ms",
        f"{loops} loops p50 ms",
        "p50 ratio",
        "1 loop req/s",
        f"{loops} loops req/s",
        "req/s gain",
    ]


def scaling_rows(
    single: Stats, single_wall: float, many: Stats, many_wall: float
) -> list[list[Any]]:
    """Per endpoint: median latency and requests/s of one loop alone and of many at once."""

    def by_endpoint(stats: Stats) -> dict[str, list[float]]:
        found: dict[str, list[float]] = {}
        for attempt in stats.attempts:
            if attempt.status is not None:
                found.setdefault(attempt.endpoint, []).append(attempt.seconds * 1000)
        return found

    alone, together = by_endpoint(single), by_endpoint(many)
    rows = []
    for endpoint in sorted(set(alone) | set(together)):
        one, all_ = alone.get(endpoint, []), together.get(endpoint, [])
        p50_one, p50_all = percentile(one, 0.5), percentile(all_, 0.5)
        rps_one = len(one) / single_wall if single_wall else float("nan")
        rps_all = len(all_) / many_wall if many_wall else float("nan")
        rows.append(
            [
                endpoint,
                p50_one,
                p50_all,
                round(p50_all / p50_one, 2) if one and all_ else float("nan"),
                round(rps_one, 1),
                round(rps_all, 1),
                round(rps_all / rps_one, 2) if rps_one else float("nan"),
            ]
        )
    return rows


def audit_rows(audit: Audit, stats: Stats) -> list[list[Any]]:
    return [
        ["sessions audited", audit.sessions],
        ["messages", audit.messages],
        ["tool calls / receipts", f"{audit.calls} / {audit.receipts}"],
        ["MessageIndex gaps", audit.gaps],
        ["duplicates (calls, results, receipts, inputs)", audit.duplicates],
        ["lost effects (acknowledged writes, results, receipts, KV)", audit.lost],
        ["sessions with revision != 1 + successful mutating receipts", audit.revision_mismatches],
        [
            "replayed dispatches checked / not replaying",
            f"{audit.replays_checked} / {audit.replay_mismatches}",
        ],
        [
            "turns sent again / not replaying",
            f"{audit.turn_replays_checked} / {audit.turn_replay_mismatches}",
        ],
        ["5xx answers", stats.server_errors()],
    ]


# --------------------------------------------------------------------------- BENCHMARKS.md

SECTION = benchlib.Section(
    "<!-- make load: begin (bench/load.py writes this part; make bench keeps it) -->",
    "<!-- make load: end -->",
)
# Two `make load` runs compared by hand (issue 32: host turns through turns/, before and
# after); neither `make load` nor `make bench` rewrites it.
COMPARISON = benchlib.Section("<!-- host-turns:begin -->", "<!-- host-turns:end -->")


def render_section(
    args: argparse.Namespace,
    *,
    stats: Stats,
    audit: Audit,
    wall: float,
    turns: int,
    context: dict[str, str],
    clean: bool,
    scaling: list[list[Any]],
    cpu: str,
) -> str:
    rps = len(stats.attempts) / wall
    statuses = ", ".join(f"{k}: {v}" for k, v in sorted(stats.statuses().items(), key=str))
    paragraphs = [
        "## Load: concurrent host loops over HTTP (issue #15)",
        f"`make load` (`bench/load.py`, loops and audit in `bench/hostloops.py`): "
        f"{args.sessions} host loops at once, each driving its own unified@2 session over HTTP "
        "the way an external host does: input -> projection (`openai-chat`) -> `turns/` with "
        "the model's answer as the OpenAI SDK returns it (a `chat.completion` with its usage), "
        "a protocol tool call (in turn `context_task_memory_set`, `context_window_open` of a "
        "new window, `context_fold_create` of the previous lookup) that the service dispatches "
        "-> projection -> `turns/` with a host tool call (`lookup`, handed back) -> its result: "
        f"{stats.requests / turns:g} requests per turn, two per model turn. One warm-up turn "
        "per loop (not "
        f"measured: each worker imports and connects lazily), then {args.turns} measured "
        f"turns, at most {args.seconds:g} s. Server: `uvicorn contextproto.asgi:application "
        f"--workers {args.server_workers}` with production settings on 127.0.0.1, PostgreSQL "
        "+ Redis, rate limits at their defaults. Client: one thread and one keep-alive "
        "connection per loop, on the same CPUs. Latency is per HTTP request as the client sees "
        "it, waiting for a free worker included. Afterwards every session is audited in the "
        "database and every call is dispatched again, which must replay its receipt.",
        f"* Date: {context['date']}; code: {context['git']}\n"
        f"* Command: `make load` ({context['command']})\n"
        f"* Machine: {os.cpu_count()} CPUs, shared with other work during the run; load "
        f"average (1/5/15 min) before / after: {context['load_before']} / "
        f"{context['load_after']}\n"
        f"* Throughput: {turns} measured turns, {len(stats.attempts)} requests in {wall:.1f} "
        f"s: **{rps:.1f} requests/s, {turns / wall:.2f} turns/s**; statuses {statuses}; "
        f"client retries {len(stats.attempts) - stats.requests}",
        f"With {args.sessions} loops always waiting for an answer, the mean latency follows "
        f"from the throughput ({args.sessions} / {rps:.1f} requests/s = "
        f"{1000 * args.sessions / rps:.0f} ms): the loops queue for the "
        f"{args.server_workers} workers, which share the CPUs with PostgreSQL and the client.",
        benchlib.table(LATENCY_HEADERS, latency_rows(stats, wall)),
        f"Scaling across processes (issue #13): the same turns driven by one loop alone, then "
        f"by {args.sessions} loops at once on {args.sessions} sessions, against the same "
        f"{args.server_workers} server processes. Requests/s can only grow as far as the "
        "CPUs left idle by one loop allow: server, PostgreSQL and client share them. The CPU "
        "line below says how busy the machine was in each phase; with the CPUs saturated the "
        "latency grows with the number of loops, whatever the code does.",
        benchlib.table(scaling_headers(args.sessions), scaling),
        cpu,
        f"Integrity audit: **{'passed' if clean else 'FAILED'}**",
        benchlib.table(["integrity check", "count"], audit_rows(audit, stats)),
    ]
    return "\n\n".join(paragraphs) + "\n"


# --------------------------------------------------------------------------- main


def _django_setup() -> None:
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "contextproto.settings")
    os.environ.setdefault("ALLOW_DEV_SECRET_KEY", "true")  # this process serves nothing
    import django

    django.setup()


def _loadavg() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "unknown"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=16, help="concurrent host loops")
    parser.add_argument("--turns", type=int, default=10, help="measured turns per loop")
    parser.add_argument("--seconds", type=float, default=180, help="stop starting turns after")
    parser.add_argument("--server-workers", type=int, default=4, help="uvicorn worker processes")
    parser.add_argument("--var-dir", default=str(ROOT / "var" / "load"))
    parser.add_argument(
        "--output",
        help="file whose load section to rewrite (default BENCHMARKS.md with the default "
        "sizes, none otherwise)",
    )
    args = parser.parse_args(argv)
    defaults = parser.parse_args([])
    if not 1 <= args.sessions <= 256 or not 1 <= args.turns <= 1000 or args.seconds <= 0:
        parser.error("--sessions 1..256, --turns 1..1000, --seconds > 0")

    os.environ.setdefault("DATABASE_URL", DEFAULT_DATABASE_URL)
    os.environ.setdefault("REDIS_URL", DEFAULT_REDIS_URL)
    database_url, redis_url = os.environ["DATABASE_URL"], os.environ["REDIS_URL"]
    if not database_url.startswith(("postgres://", "postgresql://")) or not redis_url:
        sys.exit("load: runs on PostgreSQL + Redis (DATABASE_URL, REDIS_URL)")
    # Loopback only: the server binds 127.0.0.1 and the loops talk to nothing else.
    _django_setup()
    from django.core.management import call_command

    from agents.services import application_create

    call_command("migrate", verbosity=0)
    var_dir = Path(args.var_dir)
    var_dir.mkdir(parents=True, exist_ok=True)
    server = Server(
        env=hostloops.server_env(
            database_url=database_url,
            redis_url=redis_url,
            var_dir=var_dir,
            # As `make serve` runs it, unless the caller chose a size.
            DATABASE_POOL_SIZE=os.environ.get("DATABASE_POOL_SIZE", "8"),
        ),
        log_path=var_dir / "server.log",
        workers=args.server_workers,
    )
    print(
        f"load: {args.sessions} loops x (1 warm-up + {args.turns}) turns, at most "
        f"{args.seconds:g} s; uvicorn --workers {args.server_workers} at {server.base_url}; "
        f"{os.cpu_count()} CPUs, load average before {_loadavg()}",
        flush=True,
    )
    load_before = _loadavg()
    server.start()
    stats = Stats()
    try:
        _app, key = application_create(name=f"load-{int(time.time())}")
        app_client = HttpClient(server.base_url, key, Stats())
        version_id = hostloops.setup_agent_version(app_client)
        runs = [hostloops.create_session(app_client, version_id) for _ in range(args.sessions)]
        alone = hostloops.create_session(app_client, version_id)
        app_client.close()
        # One turn per loop first, not measured: each worker imports and connects lazily.
        hostloops.run_loops(server.base_url, runs, Stats(), turns=1, seconds=args.seconds)
        # The same turns by one loop alone: the baseline of the scaling table.
        single = Stats()
        hostloops.run_loops(server.base_url, [alone], Stats(), turns=1, seconds=args.seconds)
        with CpuMeter() as single_cpu:
            single_wall = hostloops.run_loops(
                server.base_url, [alone], single, turns=1 + args.turns, seconds=args.seconds
            )
        with CpuMeter() as many_cpu:
            wall = hostloops.run_loops(
                server.base_url, runs, stats, turns=1 + args.turns, seconds=args.seconds
            )
        audit = hostloops.audit_sessions([*runs, alone])
        hostloops.verify_replays(server.base_url, [*runs, alone], Stats(), audit)
    finally:
        server.stop()

    turns = sum(r.turns_done for r in runs) - len(runs)
    print(
        f"\n{turns} measured turns, {len(stats.attempts)} requests in {wall:.1f} s: "
        f"{len(stats.attempts) / wall:.1f} requests/s, {turns / wall:.2f} turns/s; statuses "
        f"{dict(sorted(stats.statuses().items(), key=str))}; client retries "
        f"{len(stats.attempts) - stats.requests}; load average after {_loadavg()}"
    )
    print()
    print(benchlib.table(LATENCY_HEADERS, latency_rows(stats, wall)))
    print()
    scaling = scaling_rows(single, single_wall, stats, wall)
    cpu = cpu_text(single_cpu, len(single.attempts), many_cpu, len(stats.attempts), args.sessions)
    print(benchlib.table(scaling_headers(args.sessions), scaling))
    print(cpu)
    print()
    print(benchlib.table(["integrity check", "count"], audit_rows(audit, stats)))
    failed = [r for r in runs if r.error]
    for run in failed:
        print(f"loop failed: session {run.session_id}: {run.error}")
    for line in audit.problems[:50]:
        print("problem:", line)
    clean = audit.clean and not failed and stats.server_errors() == 0
    print("\nintegrity: " + ("OK" if clean else "FAILED"))
    sizes = ("sessions", "turns", "seconds", "server_workers")
    same = all(getattr(args, k) == getattr(defaults, k) for k in sizes)
    output = args.output or ("BENCHMARKS.md" if same else None)
    if output:
        context = {
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "git": _git(),
            "command": " ".join(["bench/load.py", *(argv or sys.argv[1:])]) or "bench/load.py",
            "load_before": load_before,
            "load_after": _loadavg(),
        }
        section = render_section(
            args,
            stats=stats,
            audit=audit,
            wall=wall,
            turns=turns,
            context=context,
            clean=clean,
            scaling=scaling,
            cpu=cpu,
        )
        SECTION.write(ROOT / output, section)
        print(f"load: wrote the load section of {output}")
    return 0 if clean else 1


def _git() -> str:
    import subprocess

    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=ROOT,
            capture_output=True,
            text=True,
        ).stdout.split("\n")
    except OSError:
        return "unknown"
    changed = [line for line in dirty if line.strip()]
    return f"{head} + {len(changed)} uncommitted file(s)" if changed else head or "unknown"


if __name__ == "__main__":
    sys.exit(main())
