"""Every error code the code base can answer with is in the one registry (contextproto.errors).

Scans the sources for the places a code is given — `ApplicationError(...)` and its
subclasses, the engine's `ProtocolError(...)`, and the API edge's `error_response(...)` /
`error_body(...)` — resolves each code in its module, and checks it is registered with the
status the site states, if it states one.
"""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest
from rest_framework import exceptions

from contextproto.api_errors import api_exception_handler
from contextproto.errors import ERRORS, ApplicationError, error_catalog, status_of
from contextproto.protocol import errors as engine
from contextproto.protocol.errors import ProtocolError
from contextproto.protocol.tool_results import tool_failure

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("agents", "contextproto", "sessions_app")

# Raise sites must name a registered constant, not a string, in these places.
CONSTANTS_ONLY = (
    "agents/services*.py",
    "contextproto/*.py",
    "sessions_app/services/*.py",
)
# Sites whose code is computed or passed through, and why that is covered.
COMPUTED_CODES = {
    ("agents/services.py", "errors[0]['code']"): "test_binding_error_codes_are_registered",
    ("contextproto/api_errors.py", "code"): "error_response passes its caller's code on",
    ("contextproto/api_errors.py", "exc.code"): "renders an ApplicationError/ProtocolError",
    ("contextproto/api_errors.py", "str(code)"): "test_drf_refusals_are_registered",
    ("contextproto/protocol/folds.py", "code"): "a loop over errors.FOLD_* constants",
    ("contextproto/protocol/prompt_cache.py", "first['code']"): "a PROMPT_CACHE_* constant",
    (
        "sessions_app/gateway/incoming.py",
        "exc.code",
    ): "a WireError's: test_gateway_codes_registered",
    ("sessions_app/gateway/open.py", "outcome.code"): "test_gateway_codes_registered",
    ("sessions_app/gateway/lookups.py", "exc.code"): "a WireError: INVALID_REQUEST",
    ("sessions_app/gateway/writes.py", "exc.code"): "content_check's code passed on",
}

CODE_SITES = {"ApplicationError", "ProtocolError", "error_response", "error_body"}


def _sources() -> list[Path]:
    return sorted(
        path
        for package in PACKAGES
        for path in (ROOT / package).rglob("*.py")
        if "migrations" not in path.parts
    )


def _subclasses_of_application_error(tree: ast.AST) -> set[str]:
    return {
        node.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ClassDef)
        and any(ast.unparse(base).endswith("ApplicationError") for base in node.bases)
    }


def _sites(path: Path) -> list[tuple[int, ast.Call, str]]:
    """(line, call, kind) of every call that gives an error code."""
    tree = ast.parse(path.read_text())
    subclasses = _subclasses_of_application_error(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name in subclasses:
            for call in ast.walk(node):
                if (
                    isinstance(call, ast.Call)
                    and isinstance(call.func, ast.Attribute)
                    and call.func.attr == "__init__"
                    and call.args
                ):
                    found.append((call.lineno, call, "ApplicationError"))
        if not isinstance(node, ast.Call) or not node.args:
            continue
        func = node.func
        name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
        if name in CODE_SITES:
            found.append((node.lineno, node, name))
    return found


def _module(path: Path):
    return importlib.import_module(".".join(path.relative_to(ROOT).with_suffix("").parts))


def _stated_status(call: ast.Call, kind: str) -> int | None:
    for keyword in call.keywords:
        if keyword.arg == "status" and isinstance(keyword.value, ast.Constant):
            return keyword.value.value
    position = {"ApplicationError": 3, "error_response": 2, "error_body": 2}.get(kind)
    if position is not None and len(call.args) > position:
        value = call.args[position]
        if isinstance(value, ast.Constant):
            return value.value
    return None


def _all_sites():
    for path in _sources():
        for line, call, kind in _sites(path):
            yield path.relative_to(ROOT).as_posix(), line, call, kind


SITES = list(_all_sites())


def test_the_scan_finds_the_raise_sites():
    kinds = {kind for *_rest, kind in SITES}
    assert kinds == CODE_SITES
    assert len(SITES) > 90


@pytest.mark.parametrize(
    ("where", "line", "call", "kind"),
    SITES,
    ids=[f"{where}:{line}" for where, line, _c, _k in SITES],
)
def test_every_raised_code_is_registered_with_its_status(where, line, call, kind):
    argument = call.args[0]
    expression = ast.unparse(argument)
    if (where, expression) in COMPUTED_CODES:
        return
    if isinstance(argument, ast.Constant):
        code = argument.value
    elif isinstance(argument, ast.Name | ast.Attribute):
        # A name or a dotted name, resolved in the module that raises with it.
        code = eval(expression, vars(_module(ROOT / where)))
    else:
        pytest.fail(f"{where}:{line}: a computed code ({expression}); list it in COMPUTED_CODES")
    assert code in ERRORS, f"{where}:{line}: {code!r} is not in contextproto.errors.ERRORS"
    stated = _stated_status(call, kind)
    if stated is not None and kind != "ProtocolError":
        assert stated == ERRORS[code].status, (
            f"{where}:{line}: {code} answered with {stated}, the registry says "
            f"{ERRORS[code].status}"
        )


def _constants_only(where: str) -> bool:
    return any(Path(where).match(pattern) for pattern in CONSTANTS_ONLY)


def test_services_raise_registered_constants_and_take_the_status_from_the_registry():
    offending = [
        f"{where}:{line}: {ast.unparse(call)[:80]}"
        for where, line, call, kind in SITES
        if kind == "ApplicationError"
        and _constants_only(where)
        and (
            isinstance(call.args[0], ast.Constant)
            or any(keyword.arg == "status" for keyword in call.keywords)
            or len(call.args) > 3
        )
    ]
    assert not offending, offending


def test_binding_error_codes_are_registered():
    source = (ROOT / "agents" / "services.py").read_text()
    named = set(re.findall(r'"code": ([A-Z_]+),', source))
    assert named >= {"TOOL_NOT_FOUND", "MAINTAINER_NOT_FOUND", "CROSS_APPLICATION_TOOL_FORBIDDEN"}
    module = _module(ROOT / "agents" / "services.py")
    assert all(getattr(module, name) in ERRORS for name in named)


def test_every_engine_code_is_registered():
    assert set(engine.CODES) <= set(ERRORS)
    assert engine.PROVIDER_UNKNOWN in engine.CODES


def test_the_registry_is_plain_data_for_the_schema():
    assert all(entry.code == code for code, entry in ERRORS.items())
    assert all(re.fullmatch(r"[a-z][a-z0-9_]*", code) for code in ERRORS)
    assert all(400 <= entry.status <= 599 and entry.meaning for entry in ERRORS.values())
    catalog = error_catalog()
    assert [entry["code"] for entry in catalog] == sorted(
        ERRORS, key=lambda code: (ERRORS[code].status, code)
    )
    assert catalog[0].keys() == {"code", "status", "meaning"}


def test_application_error_takes_its_status_from_the_registry():
    assert ApplicationError("session_busy", "busy").status == 409
    assert ApplicationError("maintenance_page_out_of_range", "no such page").status == 404
    assert ApplicationError("tool_call_already_answered", "answered").status == 400
    assert status_of("not_found") == 404


def test_drf_refusals_are_registered():
    """The codes DRF's own exceptions carry through api_exception_handler's fallback."""
    for refusal in (
        exceptions.MethodNotAllowed,
        exceptions.NotAcceptable,
        exceptions.PermissionDenied,
        exceptions.UnsupportedMediaType,
        exceptions.NotFound,
    ):
        assert ERRORS[refusal.default_code].status == refusal.status_code, refusal


@pytest.mark.parametrize(
    ("code", "status"),
    [
        (engine.MAINTENANCE_PAGE_OUT_OF_RANGE, 404),
        (engine.STATE_STALE, 409),
        (engine.FOLD_RANGE_INVALID, 400),
    ],
)
def test_an_engine_refusal_answers_with_the_registry_status(code, status):
    """A ProtocolError reaching the API renders with its registered status, not always 400."""
    response = api_exception_handler(ProtocolError(code, "refused", {"at": 3}), {})
    assert response is not None
    assert response.status_code == status == ERRORS[code].status
    assert response.data["error"] == {"code": code, "message": "refused", "details": {"at": 3}}


def test_codes_that_travel_in_results_and_run_errors_are_registered():
    """Tool-result and run-failure codes a client reads are in the registry too."""
    for code in (
        "snapshot_missing",
        "tool_not_available",
        "max_turns_reached",
        "provider_invalid",
        "single_tool_call_per_turn",
        "tool_internal_error",
        "provider_not_runnable",
        "provider_not_configured",
        "provider_unavailable",
        "provider_rate_limited",
        "provider_request_rejected",
        "provider_response_invalid",
        "script_invalid",
        "script_step_required",
        "script_exhausted",
        "script_expectation_failed",
        "experiment_budget_exhausted",
    ):
        assert code in ERRORS, code
    failure = tool_failure("tool_not_available", "no such tool", details={"code": "x", "at": 1})
    assert failure == {
        "success": False,
        "error": {
            "at": 1,
            "code": "tool_not_available",
            "message": "no such tool",
            "correctable": True,
        },
    }


def test_one_builder_makes_every_tool_error_result():
    """No module spells `{"success": False, ...}` itself; they call tool_failure."""
    offenders = [
        f"{path.relative_to(ROOT)}:{number}"
        for path in _sources()
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if re.search(r"""["']success["']\s*:\s*False""", line)
        and path.relative_to(ROOT).as_posix() != "contextproto/protocol/tool_results.py"
    ]
    assert not offenders, offenders
