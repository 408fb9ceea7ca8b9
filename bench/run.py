"""`make bench`: projection and dispatch scaling against the physical limit, token economy.

Runs on PostgreSQL only (DATABASE_URL), prints each table as it is measured and writes
BENCHMARKS.md (machine, date, command, the tables and the targets of issue #8, each
marked met or missed with the reason). `make bench` creates and migrates the database
first; run by hand:

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/contextproto_bench \\
        .venv/bin/python bench/run.py [--reps 30] [--only projection,dispatch,tokens]

A run of some sections writes nothing unless asked: `--refresh` replaces only those
sections of BENCHMARKS.md (or `--output`) and keeps every other figure as it was, with a
line under the header saying which sections were measured again.

The projection sessions (1k..1M messages) are built once and reused by later runs; drop
the database (`dropdb contextproto_bench`) to rebuild them from scratch.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import benchlib

SECTIONS = (
    "projection",
    "dispatch",
    "tokens",
    "economy",
    "prototypes",
    "engine",
    "gateway",
    "snapshots",
)
# Measured only when asked for (`make bench-long`): too long for `make bench`'s 15 minutes.
OPTIONAL_SECTIONS = ("economy-long",)


def _loadavg() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "unknown"


def _git() -> str:
    def run(*args: str) -> str:
        try:
            return subprocess.run(
                ["git", *args], cwd=benchlib.ROOT, capture_output=True, text=True, check=True
            ).stdout.rstrip()  # not strip(): porcelain lines start with a space
        except (OSError, subprocess.CalledProcessError):
            return ""

    head = run("rev-parse", "--short", "HEAD") or "unknown"
    dirty = [line[3:] for line in run("status", "--porcelain").splitlines() if line]
    code = [p for p in dirty if not p.startswith(("bench/", "BENCHMARKS.md", "Makefile"))]
    if not code:
        return head
    return f"{head} + uncommitted changes in {len(code)} path(s) outside bench/"


def _engine() -> dict[str, str]:
    benchlib.banner("Engine only (no database): bench/bench_engine_projection.py --repeat 10")
    started = time.perf_counter()
    output = subprocess.run(
        [sys.executable, str(benchlib.BENCH_DIR / "bench_engine_projection.py"), "--repeat", "10"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    print(output, end="")
    return {"output": output, "seconds": f"{time.perf_counter() - started:.1f}"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=30, help="projection repetitions (>= 30)")
    parser.add_argument(
        "--sizes",
        default="1000,10000,100000,1000000",
        help="projection session sizes (messages), smallest first",
    )
    parser.add_argument(
        "--only", default=",".join(SECTIONS), help=f"comma-separated subset of {SECTIONS}"
    )
    parser.add_argument(
        "--output",
        default=None,
        help="where to write the report (default BENCHMARKS.md on a full run, none otherwise)",
    )
    parser.add_argument(
        "--refresh",
        action="store_true",
        help="replace only the sections this run measured in BENCHMARKS.md (or --output), "
        "keeping the others",
    )
    args = parser.parse_args()
    wanted = [s.strip() for s in args.only.split(",") if s.strip()]
    unknown = sorted(set(wanted) - set(SECTIONS) - set(OPTIONAL_SECTIONS))
    if unknown:
        parser.error(
            f"unknown section(s) {', '.join(unknown)}; choose from {SECTIONS + OPTIONAL_SECTIONS}"
        )

    benchlib.refuse_unless_postgres()
    if os.environ.pop("REDIS_URL", None):
        print("bench: REDIS_URL ignored: maintenance and runs execute inline (eager Celery)")
    started_at = datetime.now(UTC)
    wall = time.perf_counter()
    make_started = os.environ.get("BENCH_STARTED")
    load_before = _loadavg()
    benchlib.django_setup()

    import bench_dispatch
    import bench_projection
    import bench_prototypes
    import bench_report
    import bench_tokens

    results: dict[str, object] = {}
    if "projection" in wanted:
        sizes = tuple(int(n) for n in args.sizes.split(","))
        results["projection"] = bench_projection.run(args.reps, sizes)
    if "dispatch" in wanted:
        results["dispatch"] = bench_dispatch.run()
    if "tokens" in wanted:
        results["tokens"] = bench_tokens.run()
    if "economy" in wanted:
        results["economy"] = bench_tokens.run_realistic()
    if "economy-long" in wanted:
        results["economy-long"] = bench_tokens.run_long()
    if "prototypes" in wanted:
        built = bench_projection.prepare((int(args.sizes.split(",")[0]),))[0]
        results["prototypes"] = bench_prototypes.run(built)
    if "engine" in wanted:
        results["engine"] = _engine()
    if "gateway" in wanted:
        import bench_gateway

        results["gateway"] = bench_gateway.run()
    if "snapshots" in wanted:
        import bench_snapshots

        results["snapshots"] = bench_snapshots.run(args.reps)

    seconds = time.perf_counter() - wall
    total = time.time() - float(make_started) if make_started else seconds
    context = {
        "started": started_at.strftime("%Y-%m-%d %H:%M UTC"),
        "machine": benchlib.machine(),
        "load_before": load_before,
        "load_after": _loadavg(),
        "git": _git(),
        "command": "make bench",
        "expanded": " ".join(
            [
                f"DATABASE_URL={os.environ.get('DATABASE_URL')}",
                os.path.relpath(sys.executable, benchlib.ROOT),
                "bench/run.py",
                *sys.argv[1:],
            ]
        ),
        "runner_seconds": seconds,
        "total_seconds": total,
        "total_from_make": bool(make_started),
    }
    benchlib.banner("Targets (issues #8 and #13)")
    verdicts = bench_report.targets(results)
    for verdict in verdicts:
        print(f"  [{verdict['status']}] {verdict['target']}: {verdict['measured']}")
    if "snapshots" in results:
        benchlib.banner("Goals (issue 33): snapshot storage")
        for goal in results["snapshots"]["goals"]:
            print(f"  [{goal['status']}] {goal['target']}: {goal['measured']}")
    if "tokens" in results:
        benchlib.banner("Goals (issue 24): cost with prompt caching")
        for goal in results["tokens"]["cache"]["goals"]:
            print(f"  [{goal['status']}] {goal['target']}: {goal['measured']}")
        benchlib.banner("Goals (issue 25): unified@4 against unified@2")
        for goal in results["tokens"]["cache"].get("goals_unified4", []):
            print(f"  [{goal['status']}] {goal['target']}: {goal['measured']}")
    if "gateway" in results:
        benchlib.banner("Goals (issue 31): the gateway")
        for goal in results["gateway"]["goals"]:
            print(f"  [{goal['status']}] {goal['target']}: {goal['measured']}")
    for key in ("economy", "economy-long"):
        if key in results:
            benchlib.banner(f"Goals (issue 34), {results[key]['setting']['title']}")
            for goal in results[key]["compared"]["goals"]:
                print(f"  [{goal['status']}] {goal['target']}: {goal['measured']}")
    full_run = set(wanted) == set(SECTIONS)
    output = args.output or ("BENCHMARKS.md" if full_run or args.refresh else None)
    if output:
        path = benchlib.ROOT / output
        if args.refresh and not full_run and path.exists():
            text = bench_report.refresh(path.read_text(), results, context)
        else:
            text = bench_report.render(results, verdicts, context)
            if path.exists():  # `make load`, KV history, replay, console figures live here too
                import bench_console
                import bench_kv_history
                import bench_replay
                import load

                for kept in (load, bench_kv_history, bench_replay, bench_console):
                    text = kept.SECTION.keep(path.read_text(), text)
                text = load.COMPARISON.keep(path.read_text(), text)
                missing = [k for k in OPTIONAL_SECTIONS if k not in results]
                text = bench_report.keep_sections(path.read_text(), text, missing)
        path.write_text(text)
        if "snapshots" in results:  # its own marked section (bench/bench_snapshots.py)
            import bench_snapshots

            bench_snapshots.SECTION.write(path, results["snapshots"]["section"])
        print(f"\nbench: wrote {path}")
    label = "make bench" if make_started else "bench/run.py"
    print(f"bench: {label} took {total / 60:.1f} min ({total:.0f} s; limit 15 min on 2 cores)")


if __name__ == "__main__":
    main()
