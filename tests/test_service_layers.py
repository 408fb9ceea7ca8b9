"""The services import only downwards (docs/architecture.md, issue 17).

The layer checks read the modules' source (no import), so a cycle shows even where Python
would tolerate it. A module of `sessions_app/services` or a `sessions_app/tasks*.py` that is
not in the table fails too: a new module gets its layer when it is written. The upward calls
that remain go through `store/hooks.py`, and every hook is installed at start-up.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# Lowest first. A module may import modules of its own layer and of the layers below; a
# lower layer reaches a higher one only through `store/hooks.py`, installed at start-up.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    (
        "store: the session row lock, KV, the cold store (chunk format and reads), hook slots",
        (
            "sessions_app.store.hooks",
            "sessions_app.store.codec",
            "sessions_app.store.state",
            "sessions_app.store.cold_store",
        ),
    ),
    (
        "selectors: reads, hot and cold merged (hot_reads: the projection's raw-SQL reads; "
        "usage_reads: usage and cost totals; history_reads: the state at a revision)",
        (
            "sessions_app.selectors",
            "sessions_app.hot_reads",
            "sessions_app.usage_reads",
            "sessions_app.history_reads",
        ),
    ),
    (
        "records: log writes, archive moves, runs, sessions and forks, client write ids, the "
        "reader port",
        (
            "sessions_app.services.messages",
            "sessions_app.services.archive",
            "sessions_app.services.runs",
            "sessions_app.services.client_writes",
            "sessions_app.services.reader",
            "sessions_app.services.sessions",
            "sessions_app.services.fork",
        ),
    ),
    (
        "protocol: dispatch, projection",
        ("sessions_app.services.dispatch", "sessions_app.services.projection"),
    ),
    (
        "orchestrators: the runtime, maintenance, usage (which triggers maintenance)",
        (
            "sessions_app.services.runtime",
            "sessions_app.services.maintenance",
            "sessions_app.services.usage",
        ),
    ),
    ("tasks: Celery entry points", ("sessions_app.tasks", "sessions_app.tasks_archive")),
]

LAYER_OF = {module: rank for rank, (_name, modules) in enumerate(LAYERS) for module in modules}


def _path(module: str) -> Path:
    return ROOT.joinpath(*module.split(".")).with_suffix(".py")


def _on_disk() -> set[str]:
    services = {
        f"sessions_app.services.{p.stem}"
        for p in (ROOT / "sessions_app" / "services").glob("*.py")
        if p.stem != "__init__"
    }
    tasks = {f"sessions_app.{p.stem}" for p in (ROOT / "sessions_app").glob("tasks*.py")}
    return services | tasks


def _imported(node: ast.Import | ast.ImportFrom) -> list[str]:
    """The modules of the table an import statement names (`from pkg import module` too)."""
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    elif node.level or node.module is None:
        names = [f"<relative import in line {node.lineno}>"]
    else:
        names = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
    return [name for name in names if name in LAYER_OF or name.startswith("<")]


def _imports(module: str, source: str | None = None) -> list[tuple[str, bool, int]]:
    """(imported module, inside a function, line) for every import of a module in the table."""
    tree = ast.parse(_path(module).read_text() if source is None else source)
    found: list[tuple[str, bool, int]] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import | ast.ImportFrom):
                found.extend((name, in_function, child.lineno) for name in _imported(child))
            nested = in_function or isinstance(
                child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda
            )
            visit(child, nested)

    visit(tree, False)
    return [(name, inner, line) for name, inner, line in found if name != module]


GRAPH = {module: _imports(module) for module in LAYER_OF}


def test_every_service_module_and_task_module_has_a_layer():
    missing = sorted(_on_disk() - set(LAYER_OF))
    assert not missing, f"give these modules a layer in LAYERS: {missing}"
    gone = sorted(m for m in LAYER_OF if not _path(m).exists())
    assert not gone, f"LAYERS names modules that no longer exist: {gone}"


@pytest.mark.parametrize("module", sorted(LAYER_OF))
def test_a_module_imports_no_higher_layer(module):
    upward = [
        f"line {line}: {name} ({LAYERS[LAYER_OF[name]][0].split(':')[0]})"
        for name, _inner, line in GRAPH[module]
        if name.startswith("<") or LAYER_OF[name] > LAYER_OF[module]
    ]
    assert not upward, (
        f"{module} ({LAYERS[LAYER_OF[module]][0].split(':')[0]}) imports upward: {upward}; "
        "return an effect or call a hook of sessions_app/store/hooks.py instead"
    )


@pytest.mark.parametrize("module", sorted(LAYER_OF))
def test_a_module_imports_its_siblings_at_the_top_only(module):
    inner = [f"line {line}: {name}" for name, in_function, line in GRAPH[module] if in_function]
    assert not inner, f"{module} imports sibling modules inside functions: {inner}"


def test_the_import_graph_has_no_cycle():
    done: set[str] = set()

    def walk(module: str, path: list[str]) -> None:
        if module in path:
            cycle = [*path[path.index(module) :], module]
            pytest.fail(f"import cycle: {' -> '.join(cycle)}")
        if module in done:
            return
        for name, _inner, _line in GRAPH[module]:
            if name in LAYER_OF:
                walk(name, [*path, module])
        done.add(module)

    for module in sorted(LAYER_OF):
        walk(module, [])


def test_the_walk_finds_upward_function_level_and_relative_imports():
    source = (
        "from sessions_app.services import runtime\n"
        "def f():\n"
        "    from sessions_app.services.maintenance import maintenance_request\n"
        "    from . import dispatch\n"
    )
    assert _imports("sessions_app.services.messages", source) == [
        ("sessions_app.services.runtime", False, 1),
        ("sessions_app.services.maintenance", True, 3),
        ("<relative import in line 4>", True, 4),
    ]


def test_every_hook_is_installed_once_the_apps_are_ready():
    from sessions_app.store import hooks

    declared = {value for value in vars(hooks).values() if isinstance(value, hooks.Hook)}
    assert declared == set(hooks.ALL)
    assert [hook.name for hook in hooks.ALL if not hook.installed] == []


VIEW_MODULES = ("contextproto.api", "contextproto.api_errors", "contextproto.api_schema")


@pytest.mark.parametrize(
    "module", ["agents.selectors", "agents.services", "sessions_app.selectors"]
)
def test_selectors_and_configuration_import_no_view_module(module):
    """Reads and the configuration services sit below the views (parse_uuid: contextproto.ids)."""
    tree = ast.parse(_path(module).read_text())
    named = {
        name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom)
        for name in (
            [alias.name for alias in node.names]
            if isinstance(node, ast.Import)
            else [node.module or ""]
        )
    }
    assert not named & set(VIEW_MODULES), f"{module} imports {sorted(named & set(VIEW_MODULES))}"
