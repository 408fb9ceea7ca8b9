"""A newcomer's first hour (issue 40): the README opens with the two setup commands, `make demo`
and `make serve` take PORT, and the Node the README's Claude Code needs is said where it is
installed. No server, no database: the README and the Makefile as a reader meets them."""

from __future__ import annotations

import json
import re
import subprocess

from tests.docs.test_readme import ROOT, require_command
from tests.gateway.installs import CLAUDE_CODE_PACKAGE, CLAUDE_CODE_VERSION, NODE_TREE

README = (ROOT / "README.md").read_text()


def test_the_readme_opens_with_the_two_setup_commands():
    title, _, rest = README.partition("\n\n")
    assert title == "# contextproto"
    first_paragraph, _, after = rest.partition("\n\n")
    assert first_paragraph.startswith("An LLM agent platform")
    heading, _, after = after.partition("\n\n")
    assert heading == "## Setup: two commands"
    block = after.split("```", 2)[1]
    commands = [line.split()[:2] for line in block.strip().splitlines()]
    assert commands == [["make", "demo"], ["make", "test"]]


def dry_run(target: str, *variables: str) -> str:
    require_command("make")  # under CI=true a missing one fails, never skips
    done = subprocess.run(
        ["make", "-n", target, *variables], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_make_demo_and_serve_listen_on_port_and_the_demo_says_where():
    demo = dry_run("demo", "PORT=8765")
    assert "manage.py demo --base-url http://127.0.0.1:8765" in demo  # the URLs it prints
    assert "manage.py runserver 127.0.0.1:8765" in demo
    assert "http://127.0.0.1:8765/admin/" in demo
    assert "--port 8765" in dry_run("serve", "PORT=8765")
    # Without PORT: 8000, as the README's examples say.
    assert "manage.py runserver 127.0.0.1:8000" in dry_run("demo")
    assert "--port 8000" in dry_run("serve")


def test_the_readme_says_which_node_its_claude_code_needs():
    lock = json.loads((NODE_TREE / "package-lock.json").read_text())
    engines = lock["packages"][f"node_modules/{CLAUDE_CODE_PACKAGE}"]["engines"]["node"]
    needed = int(re.fullmatch(r">=\s*(\d+)(\.\d+)*", engines)[1])
    section = README.split("## Drop-in: change the base URL", 1)[1].split("\n## ", 1)[0]
    paragraph = section[section.index("**Claude Code**") :].split("\n\n", 1)[0]
    assert f"npm install -g {CLAUDE_CODE_PACKAGE}@{CLAUDE_CODE_VERSION}" in paragraph
    assert f"Node ≥ {needed}" in paragraph
    # The suite installs and runs it on this machine's Node: the README says that Node too.
    require_command("node")
    version = subprocess.run(["node", "--version"], capture_output=True, text=True).stdout
    major = int(version.strip().lstrip("v").split(".")[0])
    assert major >= needed or f"Node {major}" in paragraph
