"""`make bench`'s gateway section (issue 31): goals and BENCHMARKS.md text from hand-made
figures, and a refresh that replaces only this section."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parents[2] / "bench"
if str(BENCH) not in sys.path:
    sys.path.insert(0, str(BENCH))

import bench_report  # noqa: E402  (bench/ is a script directory, not a package)
import gateway_report  # noqa: E402


def _row(key: str, p50: float, *, calls: int = 1, gateway: bool = True) -> dict[str, Any]:
    nan = float("nan")
    return {
        "key": key,
        "label": key,
        "calls": calls,
        "requests": 40,
        "p50": p50,
        "p95": p50 * 1.5,
        "recorded_p50": p50 * 0.6 if gateway else nan,
        "recorded_p95": p50 * 0.9 if gateway else nan,
        "upstream_extra_p50": 10.0 if gateway else nan,
        "edge_p50": p50 * 0.3 if gateway else nan,
        "problems": {},
    }


def _slow(waiting: int, p95: float, errors: int = 0, held: int | None = 0) -> dict[str, Any]:
    return {
        "phase": f"beside {waiting}" if waiting else "API alone",
        "waiting": waiting,
        "seconds": 6.0,
        "api_requests": 150,
        "api_p50": 15.0,
        "api_p95": p95,
        "api_max": p95 * 3,
        "api_errors": errors,
        "by_name": {"health": (4.0, 20.0, 40.0)},
        "recorded": {"gateway_p50": 200, "gateway_max": 300, "upstream_p50": 5100},
        "in_transaction": held if waiting else None,
        "gateway_ok": waiting,
        "gateway_statuses": {"200": waiting} if waiting else {},
        "gateway_p50_s": 5.3 if waiting else float("nan"),
        "gateway_max_s": 5.6 if waiting else float("nan"),
    }


def _results(gateway_p50: float, big_p50: float, slow: list[dict[str, Any]]) -> dict[str, Any]:
    overhead = {
        "rows": [
            _row("direct", 1.0, gateway=False),
            _row("litellm", 20.0, gateway=False),
            _row("incremental@1k", gateway_p50),
            _row("incremental@100k", big_p50),
            _row("full@1k", gateway_p50 + 50),
            _row("protocol@1k", gateway_p50 * 2, calls=2),
        ],
        "fake": {"count": 280, "p50_ms": 0.3, "p95_ms": 1.0},
        "histogram": {"count": 160, "mean_ms": 70.0},
        "projection": {"count": 200, "mean_ms": 25.0},
        "recorded": {"count": 160, "mean_ms": 70.0},
        "litellm_version": "1.108.7",
        "litellm_error": None,
        "full_messages": 681,
        "breakdown": {
            "requests": 20,
            "ok": 20,
            "statements": 34.0,
            "flushes": 8.0,
            "sql_ms": 40.0,
            "overhead_ms": 90.0,
            "probe": {"flushed_ms": 2.5, "unflushed_ms": 0.1, "select_ms": 0.05},
        },
    }
    result: dict[str, Any] = {
        "overhead": overhead,
        "slow": slow,
        "rounds": 40,
        "started": "2026-12-05 10:00 UTC",
        "load_before": "1.0 1.0 1.0",
        "load_after": "1.1 1.0 1.0",
        "seconds": 130.0,
        "prepare_seconds": 14.0,
    }
    result["goals"] = gateway_report.goals(overhead, slow)
    result["table"] = gateway_report.overhead_table(overhead)
    result["slow_table"] = gateway_report.slow_table(slow)
    return result


def _verdicts(result: dict[str, Any]) -> list[str]:
    return [goal["status"] for goal in result["goals"]]


def test_goals_follow_the_figures() -> None:
    healthy = [_slow(0, 40.0), _slow(8, 60.0), _slow(16, 80.0)]
    assert _verdicts(_results(35.0, 38.0, healthy)) == ["met", "met", "met", "met"]
    slow_gateway = _results(120.0, 160.0, [_slow(0, 40.0), _slow(8, 60.0), _slow(16, 500.0)])
    assert _verdicts(slow_gateway) == ["missed", "missed", "met", "missed"]


def test_an_error_or_a_held_transaction_beside_slow_requests_misses_the_goal() -> None:
    for slow in (
        [_slow(0, 40.0), _slow(8, 50.0, errors=1), _slow(16, 50.0)],
        [_slow(0, 40.0), _slow(8, 50.0), _slow(16, 50.0, held=3)],
    ):
        result = _results(35.0, 35.0, slow)
        assert result["goals"][-1]["status"] == "missed"
        text = "\n".join(gateway_report.section_lines(result))
        assert "It did not hold in this run" in text


def test_the_section_explains_a_missed_goal_with_the_runs_figures() -> None:
    result = _results(120.0, 125.0, [_slow(0, 40.0), _slow(8, 60.0), _slow(16, 80.0)])
    text = "\n".join(gateway_report.section_lines(result))
    assert text.startswith("## Gateway\n")
    assert "6.0x at p50 (120.0 ms vs 20.0 ms" in text
    assert "34 SQL statements" in text and "8 commits that write" in text
    assert "20 ms of flushes per request" in text
    assert "No API request failed and no transaction stayed open" in text


def test_a_refresh_replaces_only_the_gateway_section() -> None:
    old = (
        "# Benchmarks\n\n* Code: abc\n\n## 1. Projection\n\nkept\n\n"
        "<!-- make load: begin (x) -->\nload\n<!-- make load: end -->\n"
    )
    context = {
        "started": "2026-12-05 10:00 UTC",
        "expanded": "bench/run.py --only gateway --refresh",
        "runner_seconds": 130.0,
        "git": "abc",
        "machine": {
            "nproc": "2",
            "cpu": "x",
            "ram": "1",
            "os": "Linux",
            "python": "3.12",
            "postgres": "15",
        },
        "load_before": "1",
        "load_after": "1",
        "total_seconds": 130.0,
        "total_from_make": False,
        "command": "make bench",
    }
    first = bench_report.refresh(
        old, {"gateway": _results(120.0, 125.0, [_slow(0, 40.0), _slow(8, 60.0)])}, context
    )
    assert "## 1. Projection\n\nkept\n" in first
    assert first.index("## Gateway") < first.index("<!-- make load: begin")
    assert "* Refreshed after this run: Gateway on 2026-12-05 10:00 UTC" in first
    second = bench_report.refresh(
        first, {"gateway": _results(50.0, 52.0, [_slow(0, 40.0), _slow(8, 60.0)])}, context
    )
    assert second.count("## Gateway") == 1
    assert "2.5x at p50 (50.0 ms vs 20.0 ms" in second and "6.0x at p50" not in second
