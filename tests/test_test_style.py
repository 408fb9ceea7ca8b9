"""The test suite's own style: imports sit at the top of test modules too, and the engine's
tests need no Django.

An import inside a test function hides a module's dependencies and repeats itself test after
test; pytest-django sets Django up before collection, so models import fine at module level.
"""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent
# What the engine's tests (tests/protocol/, with their log builder) never import, nor
# tests/builders/: they run without a database, like the engine they test.
DJANGO_SIDE = ("django", "rest_framework", "celery", "agents", "sessions_app", "redis", "psycopg")

# Imports that stay inside a function, keyed by (test file, imported module), each with its
# reason. Nothing else in tests/ may import lazily.
FUNCTION_LEVEL: dict[tuple[str, str], str] = {}


def _top_level(statements: list[ast.stmt]) -> list[ast.stmt]:
    """The statements run at import time: the module body, through `if` and `try` blocks."""
    found: list[ast.stmt] = []
    for statement in statements:
        found.append(statement)
        if isinstance(statement, ast.If):
            found += _top_level(statement.body) + _top_level(statement.orelse)
        elif isinstance(statement, ast.Try):
            blocks = [statement.body, statement.orelse, statement.finalbody]
            blocks += [handler.body for handler in statement.handlers]
            for block in blocks:
                found += _top_level(block)
    return found


def _module(node: ast.Import | ast.ImportFrom) -> str:
    if isinstance(node, ast.ImportFrom):
        return "." * node.level + (node.module or "")
    return node.names[0].name


def function_level_imports(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every import in `path` that does not run at import time."""
    tree = ast.parse(path.read_text())
    top = {id(statement) for statement in _top_level(tree.body)}
    return sorted(
        (node.lineno, _module(node))
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom) and id(node) not in top
    )


def _found() -> dict[tuple[str, str], list[int]]:
    found: dict[tuple[str, str], list[int]] = {}
    for path in sorted(TESTS.rglob("*.py")):
        name = path.relative_to(TESTS.parent).as_posix()
        for line, module in function_level_imports(path):
            found.setdefault((name, module), []).append(line)
    return found


def test_test_modules_import_at_the_top():
    inner = {key: lines for key, lines in _found().items() if key not in FUNCTION_LEVEL}
    assert not inner, (
        "imports inside functions in tests/ (move them to the top of the module, or list them "
        f"in FUNCTION_LEVEL with the reason they must stay): {inner}"
    )


def test_every_allowed_function_level_import_is_still_there():
    stale = set(FUNCTION_LEVEL) - set(_found())
    assert not stale, f"no longer imported inside a function, drop from FUNCTION_LEVEL: {stale}"


def test_the_check_sees_an_import_inside_a_function(tmp_path: Path):
    module = tmp_path / "test_sample.py"
    module.write_text(
        "import os\n"
        "try:\n    import json\nexcept ImportError:\n    json = None\n"
        "def test_x():\n    from pathlib import Path\n"
        "class TestY:\n    def test_z(self):\n        import re\n"
    )
    assert function_level_imports(module) == [(7, "pathlib"), (10, "re")]


def test_the_engine_tests_and_their_log_builder_import_no_django():
    """tests/protocol/logbuilder.py stays apart from tests/builders/ for this reason."""
    found = []
    for path in sorted((TESTS / "protocol").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                if name.split(".")[0] in DJANGO_SIDE or name.startswith("tests.builders"):
                    found.append(f"{path.name} line {node.lineno}: {name}")
    assert not found, found
