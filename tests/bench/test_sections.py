"""BENCHMARKS.md sections: each script rewrites its own part, `make bench` keeps the others."""

from __future__ import annotations

import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"
if str(BENCH) not in sys.path:
    sys.path.insert(0, str(BENCH))

import bench_report  # noqa: E402
import benchlib  # noqa: E402  (bench/ is a script directory, not a package)

SECTION = benchlib.Section("<!-- x:begin -->", "<!-- x:end -->")


def test_a_section_is_appended_once_then_replaced_in_place(tmp_path: Path) -> None:
    path = tmp_path / "BENCHMARKS.md"
    path.write_text("# Benchmarks\n\nbefore\n")
    SECTION.write(path, "first figures")
    SECTION.write(path, "second figures\n")
    text = path.read_text()
    assert text == "# Benchmarks\n\nbefore\n\n<!-- x:begin -->\nsecond figures\n<!-- x:end -->\n"


def test_a_full_rewrite_keeps_the_section_of_the_old_text() -> None:
    old = "# old\n\n<!-- x:begin -->\nkept\n<!-- x:end -->\n"
    assert SECTION.keep(old, "# new\n") == "# new\n\n<!-- x:begin -->\nkept\n<!-- x:end -->\n"
    assert SECTION.keep("# old without it\n", "# new\n") == "# new\n"


def test_a_full_rewrite_keeps_the_long_economy_measured_by_make_bench_long() -> None:
    heading = bench_report.SECTION_HEADINGS["economy-long"]
    old = f"# old\n\n## 3. Token economy\n\nold 3\n\n{heading}\n\nlong figures\n"
    new = "# new\n\n## 3. Token economy\n\nnew 3\n"
    kept = bench_report.keep_sections(old, new, ["economy-long"])
    assert kept == f"# new\n\n## 3. Token economy\n\nnew 3\n\n{heading}\n\nlong figures\n\n"
    # Before a later section when there is one.
    later = new + "\n## Prototypes\n\nproto\n"
    assert bench_report.keep_sections(old, later, ["economy-long"]) == (
        f"# new\n\n## 3. Token economy\n\nnew 3\n\n{heading}\n\nlong figures\n\n"
        "## Prototypes\n\nproto\n"
    )
    # A run that measured it again keeps its own.
    again = new + f"\n{heading}\n\nnew long\n"
    assert bench_report.keep_sections(old, again, ["economy-long"]) == again
