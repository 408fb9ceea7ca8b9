"""The README's host-runtime quickstart and MCP client example, run as a reader would run them.

A production server (uvicorn on the ASGI app, DEBUG off, a real SECRET_KEY) on a fresh
migrated database; the quickstart's fenced block runs in bash with curl and jq exactly as
written (only the port differs), `create_application` included, with the server's
DATABASE_URL; the MCP example runs as a script against the same server's /mcp/. The blocks
are the ones marked `<!-- readme-test: NAME -->` in README.md, so the README cannot rot.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import subprocess
import sys
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.servers import free_port, running_server

ROOT = Path(__file__).resolve().parents[2]
BLOCK = re.compile(r"<!-- readme-test: ([a-z-]+) -->\n```[a-z]+\n(.*?)\n```", re.S)
README_HOST = "127.0.0.1:8000"

pytestmark = pytest.mark.slow


def readme_block(name: str) -> str:
    blocks = dict(BLOCK.findall((ROOT / "README.md").read_text()))
    assert name in blocks, f"README.md has no block marked <!-- readme-test: {name} -->"
    return blocks[name]


def require_command(name: str) -> None:
    if shutil.which(name) is None:
        reason = f"{name} is not installed (the README's quickstart uses it)"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"{reason}; CI=true: the README test must run, not skip", pytrace=False)
        pytest.skip(reason)


@dataclass(frozen=True)
class Server:
    base: str  # http://127.0.0.1:PORT
    env: dict[str, str]  # the server's environment, DATABASE_URL included

    @property
    def host(self) -> str:
        return self.base.removeprefix("http://")

    def call(self, key: str, method: str, path: str) -> dict:
        request = urllib.request.Request(
            f"{self.base}/api/v1/{path}",
            method=method,
            headers={"Authorization": f"Bearer {key}"},
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.loads(response.read())


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Server:
    """The production server as the README's Production section starts it, on its own SQLite
    file (migrated first), so the test needs no database of the test run."""
    tmp = tmp_path_factory.mktemp("readme-server")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTEST_VERSION", "DEBUG", "REDIS_URL")}
    env.update(
        DATABASE_URL=f"sqlite:///{tmp / 'server.sqlite3'}",
        VAR_DIR=str(tmp),
        SECRET_KEY=secrets.token_urlsafe(50),
        ALLOW_DEV_SECRET_KEY="false",
        ALLOWED_HOSTS="127.0.0.1,localhost",
    )
    manage = [sys.executable, "manage.py", "migrate", "--noinput"]
    subprocess.run(manage, cwd=ROOT, env=env, check=True, capture_output=True, timeout=300)
    port = free_port()
    command = [sys.executable, "-m", "uvicorn", "contextproto.asgi:application"]
    command += ["--host", "127.0.0.1", "--port", str(port)]
    command += ["--http", "contextproto.serving:H11Protocol"]
    base = f"http://127.0.0.1:{port}"
    with running_server(
        command, env=env, log=tmp / "server.log", base=base, probe="/api/v1/health/live/"
    ):
        yield Server(base=base, env=env)


@dataclass(frozen=True)
class QuickstartRun:
    script: str  # the README block as run
    output: str
    session_id: str
    session_key: str
    # The session right after the block, before any other test touches it.
    session: dict
    messages: list[dict]
    task_memory: object


@pytest.fixture(scope="module")
def quickstart(server) -> QuickstartRun:
    for command in ("bash", "curl", "jq"):
        require_command(command)
    script = readme_block("quickstart").replace(README_HOST, server.host)
    assert script.count(server.host) == 1, "the quickstart names its server once, in API="
    shown = script + '\necho "README-TEST SESSION=$SESSION SKEY=$SKEY"\n'
    # `python` is this virtualenv's, as after `. .venv/bin/activate`.
    env = {**server.env, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run(
        ["bash", "-xeuo", "pipefail", "-c", shown],  # -x: a failure shows its command
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, f"the quickstart failed:\n{done.stdout}\n{done.stderr}"
    found = re.search(r"README-TEST SESSION=(\S+) SKEY=(\S+)", done.stdout)
    assert found is not None, done.stdout
    session_id, key = found.groups()
    messages = server.call(key, "GET", f"sessions/{session_id}/messages/?afterIndex=-1")
    kv = server.call(key, "GET", f"sessions/{session_id}/kv/?prefix=taskMemory")
    return QuickstartRun(
        script=script,
        output=done.stdout,
        session_id=session_id,
        session_key=key,
        session=server.call(key, "GET", f"sessions/{session_id}/"),
        messages=messages["messages"],
        task_memory={e["key"]: e["value"] for e in kv["entries"]}.get("taskMemory"),
    )


def test_the_quickstart_runs_as_pasted_and_leaves_the_session_it_describes(quickstart):
    # Publish answered the version, its options normalized.
    assert '"status": "published"' in quickstart.output
    # Input, the protocol call and its dispatched result, the host call and the host's
    # result, the answer: each written once, in order, in window main.
    kinds = [(m["kind"], m["toolName"]) for m in quickstart.messages]
    assert kinds == [
        ("input", None),
        ("tool_call", "context_task_memory_set"),
        ("tool_result", "context_task_memory_set"),
        ("tool_call", "price_lookup"),
        ("tool_result", "price_lookup"),
        ("text", None),
    ]
    assert [m["index"] for m in quickstart.messages] == [1, 2, 3, 4, 5, 6]
    assert {m["windowId"] for m in quickstart.messages} == {"main"}
    dispatched = json.loads(quickstart.messages[2]["content"])
    assert dispatched["success"] is True and quickstart.messages[2]["isError"] is False
    # The text beside the first call is in its content; the host call kept its id.
    assert quickstart.messages[1]["content"] == "Let me note the request."
    assert quickstart.messages[4]["toolCallId"] == quickstart.messages[3]["toolCallId"] == "call_2"
    # The calls and the answer name the views they were generated from.
    assert all(m["snapshotId"] for m in quickstart.messages if m["kind"] in ("tool_call", "text"))
    # The dispatched write: task memory as the model set it, one revision on.
    assert quickstart.task_memory == dispatched["memory"]
    assert dispatched["memory"] in quickstart.script
    assert quickstart.session["stateRevision"] == 2
    # Each turn is two requests (the view, the model's answer) plus the host's tool result.
    assert quickstart.script.count('"$S/turns/"') == 3
    assert quickstart.script.count('"$S/projection/"') == 3
    assert quickstart.script.count('"$S/messages/"') == 1
    # Three usages, the replies' own, priced at the version's prices (SPEC's cost formula).
    reports = re.findall(r'"usage": (\{"prompt_tokens".*?\}\}?)\}\}\'', quickstart.script, re.S)
    assert len(reports) == 3
    usage = [json.loads(r) for r in reports]
    prices = json.loads(re.search(r'"prices": (\{[^}]*\})', quickstart.script).group(1))
    total_in = sum(u["prompt_tokens"] for u in usage)
    read = sum(u.get("prompt_tokens_details", {}).get("cached_tokens", 0) for u in usage)
    out = sum(u["completion_tokens"] for u in usage)
    cost = ((total_in - read) * prices["input"] + read * prices["cacheRead"]) / 1_000_000
    cost += out * prices["output"] / 1_000_000
    got = quickstart.session["usage"]
    assert (got["inputTokens"], got["cacheReadInputTokens"], got["outputTokens"]) == (
        total_in,
        read,
        out,
    )
    assert got["turns"] == 3 and got["cost"] == pytest.approx(cost)


def run_mcp_example(server: Server, quickstart: QuickstartRun, tmp_path: Path) -> str:
    example = tmp_path / "mcp_example.py"
    example.write_text(readme_block("mcp-client") + "\n")
    env = {
        **os.environ,
        "SESSION_KEY": quickstart.session_key,
        "CONTEXTPROTO_MCP_URL": f"{server.base}/mcp/",
    }
    done = subprocess.run(
        [sys.executable, str(example)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, f"the MCP example failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def test_the_mcp_client_example_lists_and_calls_the_sessions_tools(server, quickstart, tmp_path):
    assert f"http://{README_HOST}/mcp/" in readme_block("mcp-client")

    output = run_mcp_example(server, quickstart, tmp_path)

    tools = re.search(r"^tools: (.*)$", output, re.M).group(1).split(", ")
    assert "context_window_open" in tools and "context_task_memory_set" in tools
    assert "price_lookup" not in tools  # host tools are the host's to run
    windows = json.loads(re.search(r"^windows: (.*)$", output, re.M).group(1))
    assert [w["windowId"] for w in windows] == ["main"]
    written = re.search(r"^task memory set: True at revision (\d+)$", output, re.M)
    assert written is not None, output
    revision = int(written.group(1))
    assert revision == quickstart.session["stateRevision"] + 1

    key, sid = quickstart.session_key, quickstart.session_id
    session = server.call(key, "GET", f"sessions/{sid}/")
    assert session["stateRevision"] == revision
    kv = server.call(key, "GET", f"sessions/{sid}/kv/?prefix=taskMemory")["entries"]
    memory = re.search(r'"memory": "([^"]+)"', readme_block("mcp-client")).group(1)
    assert [(e["key"], e["value"]) for e in kv] == [("taskMemory", memory)]

    # Run again: the same toolCallIds replay their receipts; nothing changes.
    assert run_mcp_example(server, quickstart, tmp_path) == output
    assert server.call(key, "GET", f"sessions/{sid}/")["stateRevision"] == revision
