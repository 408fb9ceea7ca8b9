"""Imports point down the layers, over the whole tree (docs/architecture.md, issues 17 and 26).

The checks read the modules' source (no import), so a cycle shows even where Python would
tolerate it. Every module of `contextproto`, `agents`, `sessions_app` and `labs` (migrations
aside) has a layer; a module may import its own layer and the layers below, never a higher one;
imports sit at the top of a module (a short allow-list below says why for each exception);
the graph has no cycle. Imports under `if TYPE_CHECKING:` are types only and are skipped.
The upward calls that remain go through `sessions_app/store/hooks.py`, and every hook is
installed at start-up.
"""

from __future__ import annotations

import ast
from fnmatch import fnmatchcase
from pathlib import Path

import pytest

from sessions_app.store import hooks

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("contextproto", "agents", "sessions_app", "labs")
PRODUCT = ("contextproto", "agents", "sessions_app")

# Lowest first: (what the layer is, the module patterns it holds). The first matching layer
# wins. A lower layer reaches a higher one only through `sessions_app/store/hooks.py`,
# installed at start-up by `sessions_app/apps.py`.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("engine: pure Python, no Django", ("contextproto.protocol", "contextproto.protocol.*")),
    (
        "economics: pure Python beside the engine, no Django (the cache simulator, the cache "
        "economy report, stored views, the providers' strategies)",
        ("contextproto.economics", "contextproto.economics.*"),
    ),
    (
        "project base: codes, ids, usage sums, paging, parsing, the API's plumbing, metrics "
        "counters, traces, middleware, settings; imports no app",
        (
            "contextproto",
            "contextproto.errors",
            "contextproto.error_registry",
            "contextproto.ids",
            "contextproto.usage",
            "contextproto.tokens",
            "contextproto.pagination",
            "contextproto.parsers",
            "contextproto.metrics",
            "contextproto.middleware",
            "contextproto.api",
            "contextproto.api_errors",
            "contextproto.api_schema",
            "contextproto.throttles",
            "contextproto.checks",
            "contextproto.staticfiles",
            "contextproto.admin_site",
            "contextproto.settings",
            "contextproto.formats*",
            "contextproto.celery",
            "contextproto.telemetry",
            "contextproto.telemetry.*",
        ),
    ),
    (
        "configuration: applications, keys, host tools, agents, versions (imports nothing "
        "of sessions_app)",
        (
            "agents",
            "agents.apps",
            "agents.models",
            "agents.selectors",
            "agents.services",
            "agents.services_tools",
            "agents.services_gateway",
            "agents.model_schema",
            "agents.wire",
            "agents.management*",
        ),
    ),
    (
        "configuration's edge: its API views, admin and forms",
        ("agents.apis*", "agents.urls", "agents.forms", "agents.admin", "agents.admin.*"),
    ),
    (
        "store: models, the row lock and KV, the cold store, the message codec, hook slots; "
        "model providers; the node registry",
        (
            "sessions_app",
            "sessions_app.models",
            "sessions_app.models.*",
            "sessions_app.store",
            "sessions_app.store.*",
            "sessions_app.providers",
            "sessions_app.providers.*",
            "sessions_app.nodes",
        ),
    ),
    (
        "reads: the merged log, hot SQL, the reader port, lists, usage, history",
        ("sessions_app.reads", "sessions_app.reads.*"),
    ),
    (
        "records: log writes, archive moves, runs, sessions and forks, client write ids",
        (
            "sessions_app.services",
            "sessions_app.services.messages",
            "sessions_app.services.archive",
            "sessions_app.services.runs",
            "sessions_app.services.client_writes",
            "sessions_app.services.answers",
            "sessions_app.services.sessions",
            "sessions_app.services.fork",
        ),
    ),
    (
        "protocol: dispatch, projection",
        (
            "sessions_app.services.dispatch",
            "sessions_app.services.mcp_calls",
            "sessions_app.services.projection",
            "sessions_app.services.rebuild",
        ),
    ),
    (
        "orchestrators: the runtime, a host's turns, maintenance, usage (which triggers "
        "maintenance), the cache economy and replay",
        (
            "sessions_app.services.runtime",
            "sessions_app.services.turns",
            "sessions_app.services.turn_commit",
            "sessions_app.services.turn_spans",
            "sessions_app.services.usage",
            "sessions_app.maintenance",
            "sessions_app.maintenance.*",
            "sessions_app.cache_economy",
            "sessions_app.replay",
            "sessions_app.replay_report",
            "sessions_app.replay_wire",
        ),
    ),
    ("tasks: Celery entry points", ("sessions_app.tasks", "sessions_app.tasks_archive")),
    (
        "edge: API views, MCP server, key auth, admin pages, the console, scrape gauges, "
        "commands, the app config; the gateway (its request stages, its views)",
        ("sessions_app.gateway", "sessions_app.gateway.*", "sessions_app.*"),
    ),
    (
        "project wiring: URLs, ASGI/WSGI, the server edge, the landing page",
        (
            "contextproto.urls",
            "contextproto.api_urls",
            "contextproto.asgi",
            "contextproto.wsgi",
            "contextproto.serving",
            "contextproto.landing",
            "contextproto.apps",
        ),
    ),
    (
        "labs: the research harness (experiments, the demo scenario, their commands and admin "
        "pages); nothing of the product imports it",
        ("labs", "labs.*"),
    ),
]

# Upward imports that remain, each with who removes it.
KNOWN_UPWARD: dict[tuple[str, str], str] = {}

# Imports inside functions, each with its reason. Nothing else may import lazily.
FUNCTION_LEVEL = {
    "sessions_app.apps": "AppConfig.ready: models, tasks and services load only once the app "
    "registry is ready",
    "sessions_app.providers": "lazy SDK import: openai/anthropic load only for a version that "
    "names that vendor",
}


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {
    _module_name(path): path
    for package in PACKAGES
    for path in sorted((ROOT / package).rglob("*.py"))
    if "migrations" not in path.parts
}


def layer_of(module: str) -> int | None:
    for rank, (_what, patterns) in enumerate(LAYERS):
        if any(fnmatchcase(module, pattern) for pattern in patterns):
            return rank
    return None


def _is_type_checking(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and ast.unparse(node.test) in (
        "TYPE_CHECKING",
        "typing.TYPE_CHECKING",
    )


def _imported(node: ast.Import | ast.ImportFrom, package: str) -> list[str]:
    """The modules of the tree an import statement names (`from pkg import module` too;
    a relative import resolved against `package`, the importing module's package)."""
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    else:
        base = node.module or ""
        if node.level:
            parts = package.split(".")
            anchor = ".".join(parts[: len(parts) - (node.level - 1)])
            base = f"{anchor}.{base}" if base else anchor
        submodules = [f"{base}.{alias.name}" for alias in node.names]
        # `from pkg import submodule` names the submodule; the package itself only when a
        # name is one of its own (its __init__ runs first either way, as for `pkg.sub`).
        own = any(name not in MODULES for name in submodules)
        names = [base, *submodules] if own else submodules
    return [name for name in names if name in MODULES]


def _package_of(module: str) -> str:
    path = MODULES.get(module)
    return module if path is not None and path.name == "__init__.py" else module.rpartition(".")[0]


def imports_of(source: str, module: str = "") -> list[tuple[str, bool, int]]:
    """(imported module, inside a function, line) for every import of a module of the tree."""
    found: list[tuple[str, bool, int]] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if _is_type_checking(child):
                continue
            if isinstance(child, ast.Import | ast.ImportFrom):
                found.extend(
                    (name, in_function, child.lineno)
                    for name in _imported(child, _package_of(module))
                )
            nested = in_function or isinstance(
                child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda
            )
            visit(child, nested)

    visit(ast.parse(source), False)
    return [(name, inner, line) for name, inner, line in found if name != module]


GRAPH = {module: imports_of(path.read_text(), module) for module, path in MODULES.items()}


def test_every_module_has_a_layer():
    missing = sorted(module for module in MODULES if layer_of(module) is None)
    assert not missing, f"give these modules a layer in LAYERS: {missing}"
    assert len(MODULES) > 140


def test_the_allow_lists_name_modules_that_exist():
    named = {module for pair in KNOWN_UPWARD for module in pair} | set(FUNCTION_LEVEL)
    assert named <= set(MODULES), sorted(named - set(MODULES))


@pytest.mark.parametrize("module", sorted(MODULES))
def test_a_module_imports_no_higher_layer(module):
    rank = layer_of(module)
    upward = [
        f"line {line}: {name}"
        for name, _inner, line in GRAPH[module]
        if name.startswith("<") or (layer_of(name) > rank and (module, name) not in KNOWN_UPWARD)  # type: ignore[operator]
    ]
    assert not upward, (
        f"{module} ({LAYERS[rank][0].split(':')[0]}) imports upward: {upward}; return an "  # type: ignore[index]
        "effect or call a hook of sessions_app/store/hooks.py instead"
    )


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_sit_at_the_top_of_the_module(module):
    inner = [f"line {line}: {name}" for name, in_function, line in GRAPH[module] if in_function]
    if module in FUNCTION_LEVEL:
        assert inner, f"{module} no longer imports inside a function: drop it from FUNCTION_LEVEL"
        return
    assert not inner, f"{module} imports inside functions: {inner}"


def test_no_product_module_imports_labs():
    """The harness can go (or be left out of a deployment) without touching the product."""
    product = [m for m in MODULES if m.split(".")[0] in PRODUCT]
    found = [
        f"{module} line {line}: {name}"
        for module in product
        for name, _inner, line in GRAPH[module]
        if name.split(".")[0] == "labs"
    ]
    assert not found, found
    assert layer_of("labs.experiments.runner") == len(LAYERS) - 1


def test_the_known_upward_imports_are_still_there():
    """An entry of KNOWN_UPWARD that was fixed is removed from the list."""
    stale = [pair for pair in KNOWN_UPWARD if pair[1] not in {n for n, *_ in GRAPH[pair[0]]}]
    assert not stale, stale


def test_the_import_graph_has_no_cycle():
    done: set[str] = set()

    def walk(module: str, path: list[str]) -> None:
        if module in path:
            cycle = [*path[path.index(module) :], module]
            pytest.fail(f"import cycle: {' -> '.join(cycle)}")
        if module in done:
            return
        for name, _inner, _line in GRAPH[module]:
            if name in MODULES:
                walk(name, [*path, module])
        done.add(module)

    for module in sorted(MODULES):
        walk(module, [])


def test_the_walk_finds_upward_function_level_relative_and_skips_type_only_imports():
    """`from . import x` in sessions_app/services/messages.py is sessions_app.services.x."""
    source = (
        "from typing import TYPE_CHECKING\n"
        "from sessions_app.services import runtime\n"
        "if TYPE_CHECKING:\n"
        "    from sessions_app.tasks import run_advance\n"
        "def f():\n"
        "    from sessions_app.maintenance import maintenance_request\n"
        "    from . import dispatch\n"
    )
    assert imports_of(source, "sessions_app.services.messages") == [
        ("sessions_app.services.runtime", False, 2),
        ("sessions_app.maintenance", True, 6),
        ("sessions_app.services.dispatch", True, 7),
    ]
    assert layer_of("sessions_app.services.runtime") > layer_of("sessions_app.services.messages")


def test_a_cycle_is_found():
    graph = {"a": [("b", False, 1)], "b": [("a", False, 1)]}
    seen: list[str] = []

    def walk(module: str, path: list[str]) -> None:
        if module in path:
            seen.append(" -> ".join([*path[path.index(module) :], module]))
            return
        for name, *_rest in graph[module]:
            walk(name, [*path, module])

    walk("a", [])
    assert seen == ["a -> b -> a"]


# The pure layers: the engine and cache economics beside it (imports no Django).
PURE_LAYERS = (0, 1)


def test_the_engine_imports_no_django_and_nothing_above_it():
    pure = [m for m in MODULES if layer_of(m) in PURE_LAYERS]
    assert {"contextproto.protocol.view", "contextproto.economics.cache_sim"} <= set(pure)
    for module in pure:
        source = MODULES[module].read_text()
        tree = ast.parse(source)
        named = {
            alias.name if isinstance(node, ast.Import) else (node.module or "")
            for node in ast.walk(tree)
            if isinstance(node, ast.Import | ast.ImportFrom)
            for alias in node.names
        }
        assert not {n for n in named if n.split(".")[0] in ("django", "rest_framework")}, module


def test_every_hook_is_installed_once_the_apps_are_ready():
    declared = {value for value in vars(hooks).values() if isinstance(value, hooks.Hook)}
    assert declared == set(hooks.ALL)
    assert [hook.name for hook in hooks.ALL if not hook.installed] == []


VIEW_MODULES = ("contextproto.api_errors", "contextproto.api_schema")


@pytest.mark.parametrize(
    "module",
    [
        "agents.selectors",
        "agents.services",
        "sessions_app.reads.raw_log",
        "sessions_app.reads.lists",
    ],
)
def test_selectors_and_configuration_import_no_view_module(module):
    """Reads and the configuration services sit below the views (parse_uuid: contextproto.ids)."""
    named = {name for name, _inner, _line in GRAPH[module]}
    assert not named & set(VIEW_MODULES), f"{module} imports {sorted(named & set(VIEW_MODULES))}"


def test_the_engine_core_imports_nothing_of_the_gateway_package():
    """The gateway's wire formats sit on the engine; the engine never depends on them (the
    client's state and the forwarded parameters are the engine's own: client_state,
    parameters)."""
    gateway = "contextproto.protocol.gateway"
    core = [
        m for m in MODULES if m.startswith("contextproto.protocol") and not m.startswith(gateway)
    ]
    found = sorted(
        (module, name)
        for module in core
        for name, _inner, _line in GRAPH[module]
        if name == gateway or name.startswith(gateway + ".")
    )
    assert not found, f"the engine core imports the gateway package: {found}"
