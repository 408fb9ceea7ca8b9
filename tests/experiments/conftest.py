"""Experiment harness tests: the example plan, scripted offline and over local fake APIs."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.core.management import call_command

# Any non-loopback connection fails the test (the provider tests' guard, reused).
from tests.providers.conftest import loopback_only  # noqa: F401

EXAMPLE_PLAN = Path(settings.BASE_DIR) / "experiments" / "unified-mapping-ab.json"


@pytest.fixture
def example_plan() -> dict[str, Any]:
    """A fresh copy of the repository's example plan, to modify per test."""
    return copy.deepcopy(json.loads(EXAMPLE_PLAN.read_text(encoding="utf-8")))


@pytest.fixture
def reports_dir(tmp_path: Path, settings: Any) -> Path:
    settings.EXPERIMENT_REPORTS_DIR = str(tmp_path / "reports")
    return tmp_path / "reports"


@pytest.fixture
def run_plan(tmp_path: Path, reports_dir: Path) -> Callable[..., tuple[dict[str, Any], str]]:
    """Write `plan` to a file, run the command on it, return (report.json, stdout)."""
    counter = iter(range(1000))

    def run(plan: dict[str, Any], *args: str, provider: str = "scripted") -> tuple[dict, str]:
        n = next(counter)
        path = tmp_path / f"plan-{n}.json"
        path.write_text(json.dumps(plan), encoding="utf-8")
        out_dir = reports_dir / f"20270101T00000{n}Z-test-{n}"
        stdout = StringIO()
        call_command(
            "run_experiment",
            str(path),
            "--provider",
            provider,
            "--out",
            str(out_dir),
            *args,
            stdout=stdout,
        )
        report = json.loads((out_dir / "report.json").read_text(encoding="utf-8"))
        return report, stdout.getvalue()

    return run


def group(report: dict[str, Any], group_id: str) -> dict[str, Any]:
    return next(g for g in report["groups"] if g["id"] == group_id)


def stage(report: dict[str, Any], group_id: str, stage_id: str) -> dict[str, Any]:
    return next(s for s in group(report, group_id)["stages"] if s["id"] == stage_id)


def runs(report: dict[str, Any], group_id: str, stage_id: str) -> list[dict[str, Any]]:
    return [r for s in stage(report, group_id, stage_id)["sessions"] for r in s["runs"]]


def check(run: dict[str, Any], name: str) -> dict[str, Any]:
    return next(c for c in run["checks"] if c["name"] == name)
