"""The agent frameworks the gateway's client tests run unchanged, installed once and cached.

* The OpenAI Agents SDK (`openai-agents`, pinned in pyproject.toml's `agents-sdk` extra) runs
  in a virtualenv of its own under var/clients/: it installs a top-level package `agents`,
  like this project's Django app, so it can never be imported beside the project
  (docs/decisions.md, "The OpenAI Agents SDK runs from a virtualenv of its own"). Its clients run
  as scripts in a subprocess.
* Arize Phoenix (`arize-phoenix`, pinned in the `phoenix` extra) runs from a virtualenv of
  its own under var/clients/ too: a whole web stack with its own pins, started as
  `phoenix serve` in a subprocess (tests/telemetry/phoenix.py).
* Claude Code is the npm package `@anthropic-ai/claude-code` at CLAUDE_CODE_VERSION (its
  native CLI comes in a platform package from the same registry).

Each install is keyed by what it installs, built under a lock (two test workers may ask at
once), marked complete when it is, and kept for the next run. A failed
install skips the test locally and fails it with CI=true: CI must have run the client.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CACHE = ROOT / "var" / "clients"
# The Claude Code release these tests (and the README's example) were checked with.
CLAUDE_CODE_PACKAGE = "@anthropic-ai/claude-code"
CLAUDE_CODE_VERSION = "2.1.332"
INSTALL_TIMEOUT = 600


def unavailable(reason: str) -> None:
    """Skip, or fail under CI=true: a client test must not pass CI without its client."""
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{reason} (CI=true: the client must run, not skip)", pytrace=False)
    pytest.skip(reason)


def _pins(extra: str) -> list[str]:
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return list(data["project"]["optional-dependencies"][extra])


def project_pin(name: str) -> str:
    """This project's own pin of `name` (`openai==3.57.0`), so both venvs speak alike."""
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())
    for requirement in data["project"]["dependencies"]:
        if re.split(r"[=<>\[ ]", requirement, maxsplit=1)[0] == name:
            return requirement
    raise AssertionError(f"pyproject.toml pins no {name}")


@contextmanager
def _locked(name: str) -> Iterator[None]:
    CACHE.mkdir(parents=True, exist_ok=True)
    with (CACHE / f".{name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _key(*parts: str) -> str:
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:12]


def _run(command: list[str], what: str, **kwargs: object) -> None:
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=INSTALL_TIMEOUT, **kwargs
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        unavailable(f"{what} failed: {exc}")
        return
    if done.returncode != 0:
        output = done.stdout[-3000:] + done.stderr[-3000:]
        unavailable(f"{what} failed ({done.returncode}):\n{output}")


def agents_sdk_python() -> Path:
    """The interpreter of a virtualenv holding the pinned Agents SDK (and not this project)."""
    requirements = [*_pins("agents-sdk"), project_pin("openai")]
    python = sys.version.split()[0]
    home = CACHE / f"agents-sdk-{_key(python, *requirements)}"
    interpreter = home / "bin" / "python"
    with _locked("agents-sdk"):
        if (home / ".complete").exists():
            return interpreter
        # A venv's scripts name their interpreter by path: build it where it will live.
        shutil.rmtree(home, ignore_errors=True)
        _run([sys.executable, "-m", "venv", str(home)], "creating the Agents SDK venv")
        _run(
            [str(interpreter), "-m", "pip", "install", "--quiet", *requirements],
            f"pip install {' '.join(requirements)}",
        )
        (home / ".complete").write_text("\n".join(requirements) + "\n")
    return interpreter


def phoenix_python() -> Path:
    """The interpreter of a virtualenv holding the pinned Arize Phoenix (and not this project)."""
    requirements = _pins("phoenix")
    python = sys.version.split()[0]
    home = CACHE / f"phoenix-{_key(python, *requirements)}"
    interpreter = home / "bin" / "python"
    with _locked("phoenix"):
        if (home / ".complete").exists():
            return interpreter
        shutil.rmtree(home, ignore_errors=True)
        _run([sys.executable, "-m", "venv", str(home)], "creating the Phoenix venv")
        _run(
            [str(interpreter), "-m", "pip", "install", "--quiet", *requirements],
            f"pip install {' '.join(requirements)}",
        )
        (home / ".complete").write_text("\n".join(requirements) + "\n")
    return interpreter


def claude_code() -> Path:
    """The `claude` command of the pinned Claude Code release."""
    if shutil.which("npm") is None:
        unavailable("npm is not installed (Claude Code comes from the npm registry)")
    home = CACHE / f"claude-code-{CLAUDE_CODE_VERSION}"
    command = home / "node_modules" / ".bin" / "claude"
    with _locked("claude-code"):
        if (home / ".complete").exists():
            return command
        shutil.rmtree(home, ignore_errors=True)
        home.mkdir(parents=True)
        _run(
            [
                "npm",
                "install",
                "--no-audit",
                "--no-fund",
                "--prefix",
                str(home),
                f"{CLAUDE_CODE_PACKAGE}@{CLAUDE_CODE_VERSION}",
            ],
            f"npm install {CLAUDE_CODE_PACKAGE}@{CLAUDE_CODE_VERSION}",
        )
        _run([str(command), "--version"], "claude --version")
        (home / ".complete").write_text(CLAUDE_CODE_VERSION + "\n")
    return command
