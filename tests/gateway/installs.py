"""The agent frameworks the gateway's client tests run unchanged, installed once and cached.

* The OpenAI Agents SDK (`openai-agents`, pinned in pyproject.toml's `agents-sdk` extra) runs
  in a virtualenv of its own under var/clients/: it installs a top-level package `agents`,
  like this project's Django app, so it can never be imported beside the project
  (docs/decisions.md, "The OpenAI Agents SDK runs from a virtualenv of its own"). Its clients run
  as scripts in a subprocess.
* The Node clients (Claude Code, Codex CLI, the Vercel AI SDK with its OpenAI and Anthropic
  providers) are pinned in ONE package.json + package-lock.json, tests/clients/node/, and
  installed with `npm ci` into var/clients/node-<hash of the lock>. Claude Code and Codex
  are native binaries in platform packages from the same registry, so they run on any Node
  npm runs on (Claude Code's package declares Node >= 22 for its installer only; its binary
  ran here on Node 20). The drivers (tests/clients/node/*.mjs) are copied beside that
  node_modules when asked for, since ESM resolves packages from the script's own directory.
* Pydantic AI (pyproject.toml's `pydantic-ai` extra) and LiteLLM as a client (the `bench`
  extra's pin, without the proxy's extras) run from virtualenvs of their own as well: neither
  belongs in the project's venv, and their drivers are scripts in tests/clients/.
* Arize Phoenix (`arize-phoenix`, pinned in the `phoenix` extra) runs from a virtualenv of
  its own under var/clients/ too: a whole web stack with its own pins, started as
  `phoenix serve` in a subprocess (tests/telemetry/phoenix.py).

Each install is keyed by what it installs, built under a lock (two test workers may ask at
once), marked complete when it is, and kept for the next run. A failed
install skips the test locally and fails it with CI=true: CI must have run the client.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CACHE = ROOT / "var" / "clients"
NODE_TREE = ROOT / "tests" / "clients" / "node"
CLAUDE_CODE_PACKAGE = "@anthropic-ai/claude-code"
CODEX_PACKAGE = "@openai/codex"
INSTALL_TIMEOUT = 600


def node_pin(package: str) -> str:
    """The version tests/clients/node/package.json pins for `package`."""
    return str(json.loads((NODE_TREE / "package.json").read_text())["dependencies"][package])


# The Claude Code release these tests (and the README's example) were checked with.
CLAUDE_CODE_VERSION = node_pin(CLAUDE_CODE_PACKAGE)
CODEX_VERSION = node_pin(CODEX_PACKAGE)


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


def _client_venv(name: str, requirements: list[str]) -> Path:
    """The interpreter of var/clients/<name>-<key>, a virtualenv holding `requirements` only."""
    python = sys.version.split()[0]
    home = CACHE / f"{name}-{_key(python, *requirements)}"
    interpreter = home / "bin" / "python"
    with _locked(name):
        if (home / ".complete").exists():
            return interpreter
        # A venv's scripts name their interpreter by path: build it where it will live.
        shutil.rmtree(home, ignore_errors=True)
        _run([sys.executable, "-m", "venv", str(home)], f"creating the {name} venv")
        _run(
            [str(interpreter), "-m", "pip", "install", "--quiet", *requirements],
            f"pip install {' '.join(requirements)}",
        )
        (home / ".complete").write_text("\n".join(requirements) + "\n")
    return interpreter


def phoenix_python() -> Path:
    """The interpreter of a virtualenv holding the pinned Arize Phoenix (and not this project)."""
    return _client_venv("phoenix", _pins("phoenix"))


def agents_sdk_python() -> Path:
    """The interpreter of a virtualenv holding the pinned Agents SDK (and not this project)."""
    return _client_venv("agents-sdk", [*_pins("agents-sdk"), project_pin("openai")])


def pydantic_ai_python() -> Path:
    """The interpreter of a virtualenv holding the pinned Pydantic AI (OpenAI and Anthropic)."""
    return _client_venv(
        "pydantic-ai", [*_pins("pydantic-ai"), project_pin("openai"), project_pin("anthropic")]
    )


def litellm_python() -> Path:
    """The interpreter of a virtualenv holding LiteLLM as a client (`litellm.completion`).

    The pin is the `bench` extra's (the proxy there), without the proxy's own extras.
    """
    (pin,) = [p for p in _pins("bench") if p.startswith("litellm")]
    return _client_venv("litellm", [re.sub(r"\[.*?\]", "", pin)])


@dataclass(frozen=True)
class NodeClients:
    """One `npm ci` of tests/clients/node/: its commands and the drivers beside them."""

    home: Path  # holds package.json, package-lock.json, node_modules/ and the drivers

    @property
    def claude(self) -> Path:
        return self.home / "node_modules" / ".bin" / "claude"

    @property
    def codex(self) -> Path:
        return self.home / "node_modules" / ".bin" / "codex"

    def driver(self, name: str) -> Path:
        """tests/clients/node/<name>, copied where its imports resolve (this install's)."""
        source = NODE_TREE / name
        target = self.home / "drivers" / name
        text = source.read_text()
        # Two test workers may copy at once: write aside, then rename into place.
        if not target.exists() or target.read_text() != text:
            target.parent.mkdir(exist_ok=True)
            partial = target.with_name(f".{name}.{os.getpid()}")
            partial.write_text(text)
            partial.replace(target)
        return target


def node_clients() -> NodeClients:
    """The Node clients of tests/clients/node/package-lock.json, installed once (`npm ci`)."""
    if shutil.which("npm") is None:
        unavailable("npm is not installed (the Node clients come from the npm registry)")
    lock = (NODE_TREE / "package-lock.json").read_bytes()
    manifest = (NODE_TREE / "package.json").read_bytes()
    node = subprocess.run(["node", "--version"], capture_output=True, text=True).stdout.strip()
    home = CACHE / f"node-{_key(node, manifest.decode(), lock.decode())}"
    clients = NodeClients(home)
    with _locked("node"):
        if (home / ".complete").exists():
            return clients
        shutil.rmtree(home, ignore_errors=True)
        home.mkdir(parents=True)
        (home / "package.json").write_bytes(manifest)
        (home / "package-lock.json").write_bytes(lock)
        # `npm ci`: exactly the lock; Claude Code's postinstall puts its native binary in place.
        _run(["npm", "ci", "--no-audit", "--no-fund"], "npm ci (tests/clients/node)", cwd=home)
        _run([str(clients.claude), "--version"], "claude --version")
        _run([str(clients.codex), "--version"], "codex --version")
        (home / ".complete").write_text(node + "\n")
    return clients


def claude_code() -> Path:
    """The `claude` command of the pinned Claude Code release."""
    return node_clients().claude


def codex() -> Path:
    """The `codex` command of the pinned Codex CLI release."""
    return node_clients().codex
