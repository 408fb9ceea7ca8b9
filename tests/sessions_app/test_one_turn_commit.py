"""One commit writes a model's answer (issue 42): `turn_commit.turn_commit_locked` (answer,
dispatch of its protocol calls, usage), called by the built-in runtime, which the gateway
drives, and by a host's `turns/`; nothing else writes an answer."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
PRODUCT = ("contextproto", "agents", "sessions_app", "labs")


def _callers(function: str) -> set[str]:
    """The product modules (as paths) that call `function` by name or as an attribute."""
    found = set()
    for package in PRODUCT:
        for path in (ROOT / package).rglob("*.py"):
            tree = ast.parse(path.read_text())
            for node in ast.walk(tree):
                if isinstance(node, ast.Call):
                    name = getattr(node.func, "id", None) or getattr(node.func, "attr", None)
                    if name == function:
                        found.add(str(path.relative_to(ROOT)))
    return found


def test_only_turn_commit_writes_an_answer() -> None:
    assert _callers("answer_record_locked") == {"sessions_app/services/turn_commit.py"}


def test_the_runtime_and_a_hosts_turns_commit_through_it_and_the_gateway_drives_the_runtime():
    assert _callers("turn_commit_locked") == {
        "sessions_app/services/runtime.py",
        "sessions_app/services/turns.py",
    }
    assert "sessions_app/gateway/drive.py" in _callers("run_turns")
