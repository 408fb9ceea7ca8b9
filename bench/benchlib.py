"""Shared helpers of the PostgreSQL benchmarks: Django setup, timing, statistics, tables."""

from __future__ import annotations

import math
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
BENCH_DIR = ROOT / "bench"
DEFAULT_DATABASE_URL = "postgres://postgres@127.0.0.1:5432/contextproto_bench"


def refuse_unless_postgres() -> None:
    """Exit with instructions unless DATABASE_URL names a PostgreSQL database."""
    url = os.environ.get("DATABASE_URL", "")
    if not url.startswith(("postgres://", "postgresql://", "pgsql://")):
        shown = url or "(unset)"
        sys.exit(
            f"bench: DATABASE_URL is {shown}; the benchmarks run on PostgreSQL only.\n"
            f"  make bench                       # defaults to {DEFAULT_DATABASE_URL}\n"
            f"  DATABASE_URL={DEFAULT_DATABASE_URL} \\\n"
            "    .venv/bin/python bench/run.py  # after createdb + manage.py migrate"
        )


def django_setup() -> None:
    """Set Django up for a plain script run from the repository root or from bench/."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "contextproto.settings")
    import django

    django.setup()
    from django.db import connection

    if connection.vendor != "postgresql":
        sys.exit(f"bench: the database is {connection.vendor}, not PostgreSQL; see DATABASE_URL.")


# --------------------------------------------------------------------------- statistics


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else float("nan")


def p95(values: Sequence[float]) -> float:
    """Nearest-rank 95th percentile."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[max(0, math.ceil(0.95 * len(ordered)) - 1)]


def ms(seconds: float) -> float:
    return seconds * 1000.0


# --------------------------------------------------------------------------- SQL timing


@dataclass
class SqlClock:
    """Counts statements and their time on the current thread's connection."""

    queries: int = 0
    seconds: float = 0.0
    by_prefix: dict[str, float] = field(default_factory=dict)

    def __call__(self, execute: Callable, sql: str, params: Any, many: bool, context: Any) -> Any:
        start = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            spent = time.perf_counter() - start
            self.queries += 1
            self.seconds += spent
            head = " ".join(sql.split()[:3])
            self.by_prefix[head] = self.by_prefix.get(head, 0.0) + spent


@contextmanager
def sql_clock() -> Iterator[SqlClock]:
    from django.db import connection

    clock = SqlClock()
    with connection.execute_wrapper(clock):
        yield clock


# --------------------------------------------------------------------------- output


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A GitHub-flavoured Markdown table, readable as plain text too (numbers right-aligned)."""
    cells = [[str(h) for h in headers]] + [[_cell(v) for v in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    numeric = [
        all(isinstance(row[i], int | float) for row in rows) if rows else False
        for i in range(len(headers))
    ]
    lines = []
    for n, row in enumerate(cells):
        padded = [
            c.rjust(w) if right else c.ljust(w)
            for c, w, right in zip(row, widths, numeric, strict=True)
        ]
        lines.append("| " + " | ".join(padded) + " |")
        if n == 0:
            lines.append(
                "|"
                + "|".join(
                    "-" * (w + 1) + ":" if right else ":" + "-" * (w + 1)
                    for w, right in zip(widths, numeric, strict=True)
                )
                + "|"
            )
    return "\n".join(lines)


def _cell(value: Any) -> str:
    if isinstance(value, float):
        if math.isnan(value):
            return "-"
        return f"{value:.2f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def banner(title: str) -> None:
    print(f"\n=== {title}", flush=True)


def log(message: str) -> None:
    print(f"  {message}", flush=True)


# --------------------------------------------------------------------------- machine


def machine() -> dict[str, str]:
    """nproc, CPU model, RAM, OS and the PostgreSQL server version."""
    from django.db import connection

    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    ram = "unknown"
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                ram = f"{int(line.split()[1]) / 1024 / 1024:.1f} GiB"
                break
    except OSError:
        pass
    try:
        nproc = subprocess.run(["nproc"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        nproc = str(os.cpu_count())
    with connection.cursor() as cursor:
        cursor.execute("SELECT version()")
        server = cursor.fetchone()[0].split(" on ")[0]
        cursor.execute("SHOW shared_buffers")
        shared_buffers = cursor.fetchone()[0]
    return {
        "nproc": nproc.strip(),
        "cpu": cpu,
        "ram": ram,
        "os": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "postgres": f"{server} (shared_buffers {shared_buffers}, same host, TCP 127.0.0.1)",
    }


@dataclass(frozen=True)
class Section:
    """A part of BENCHMARKS.md that one script writes between two markers and the others keep."""

    begin: str
    end: str

    def keep(self, old_text: str, new_text: str) -> str:
        """`new_text` with this section of `old_text` appended (for bench/run.py's rewrite)."""
        start, end = old_text.find(self.begin), old_text.find(self.end)
        if start < 0 or end < 0:
            return new_text
        return new_text.rstrip("\n") + "\n\n" + old_text[start : end + len(self.end)] + "\n"

    def write(self, path: Path, section: str) -> None:
        """Replace this section of `path` (or append it); leave the rest of the file alone."""
        text = path.read_text() if path.exists() else "# Benchmarks\n"
        block = f"{self.begin}\n{section.strip()}\n{self.end}"
        start, end = text.find(self.begin), text.find(self.end)
        if start >= 0 and end >= 0:
            text = text[:start] + block + text[end + len(self.end) :]
        else:
            text = text.rstrip("\n") + "\n\n" + block + "\n"
        path.write_text(text)


def goal_lines(title: str, goals: list[dict[str, str]]) -> list[str]:
    """A goals table and, under it, why each goal that is not met was missed."""
    if not goals:
        return []
    lines = [title, "", "| goal | measured | status |", "|:--|:--|:--|"]
    for goal in goals:
        lines.append(f"| {goal['target']} | {goal['measured']} | **{goal['status']}** |")
    lines.append("")
    for goal in goals:
        if goal["status"] != "met" and goal.get("why"):
            lines += [f"**{goal['target']} - {goal['status']}.** {goal['why']}", ""]
    return lines
