"""One seam per wire format (issue 38 item 3): nothing outside the wire modules branches on a
client's format. A new client API is one module implementing `ClientWire` and one entry in
`WIRES`; the pipeline (sessions_app/gateway/) asks the request's wire, never which it is."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("contextproto", "agents", "sessions_app", "labs")
# The wire modules themselves, and the one mapping of a path to its wire (routing data).
WIRE_MODULES = {
    "contextproto/protocol/gateway/wire.py",
    "contextproto/protocol/gateway/wires.py",
    "contextproto/protocol/gateway/openai_wire.py",
    "contextproto/protocol/gateway/anthropic_wire.py",
    "contextproto/protocol/gateway/responses_wire.py",
    "sessions_app/gateway/paths.py",
}
FORMAT_NAMES = ("ClientFormat", "client_format", ".format", "anthropic_wire", "openai_wire")


def _about_format(node: ast.AST) -> bool:
    text = ast.unparse(node)
    return any(name in text for name in FORMAT_NAMES)


def _branches(tree: ast.AST) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare) and any(
            _about_format(part) for part in (node.left, *node.comparators)
        ):
            found.append((node.lineno, ast.unparse(node)))
        elif isinstance(node, ast.Match) and _about_format(node.subject):
            found.append((node.lineno, ast.unparse(node.subject)))
    return found


def test_no_module_outside_the_wire_modules_branches_on_the_client_format():
    offenders = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            relative = path.relative_to(ROOT).as_posix()
            if relative in WIRE_MODULES or "/migrations/" in relative:
                continue
            found = _branches(ast.parse(path.read_text()))
            if found:
                offenders[relative] = found
    assert not offenders, offenders


def test_the_rule_finds_a_branch_on_the_format():
    source = "if request.format == ClientFormat.ANTHROPIC:\n    pass\n"
    assert _branches(ast.parse(source)) == [(1, "request.format == ClientFormat.ANTHROPIC")]
