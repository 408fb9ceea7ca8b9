"""Every error code the API can answer with is listed, with its status, in the OpenAPI description.

The codes are collected from the source: each code given to an `ApplicationError`, `NotFound`
or the error handler's `error_response`/`error_body` in the Django side (a literal, or a
constant resolved in its module), and every code of the engine, whose refusals answer 400.
Codes that only travel inside a tool result (a receipt's `result.error.code`) are not HTTP
errors and are not collected.
"""

from __future__ import annotations

import ast
import importlib
import json
import re
from pathlib import Path

import pytest
from django.core.management import call_command
from rest_framework.test import APIClient

from contextproto.api_schema import error_codes
from contextproto.protocol import errors as engine

ROOT = Path(__file__).resolve().parents[2]
SOURCES = ("agents", "sessions_app", "contextproto")
RAISERS = {"ApplicationError", "error_response", "error_body"}


def _module_name(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts)


def _django_side_files():
    for package in SOURCES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).parts
            if "migrations" in parts or parts[:2] == ("contextproto", "protocol"):
                continue
            yield path


def emitted_codes() -> dict[str, str]:
    """code -> where it is raised, for every code the Django side can answer with."""
    found: dict[str, str] = {"not_found": "NotFound"}
    for path in _django_side_files():
        tree = ast.parse(path.read_text())
        module = None
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and node.args):
                continue
            name = getattr(node.func, "id", None) or getattr(node.func, "attr", None)
            if name not in RAISERS:
                continue
            argument = node.args[0]
            where = f"{path.relative_to(ROOT)}:{node.lineno}"
            if isinstance(argument, ast.Constant) and isinstance(argument.value, str):
                found[argument.value] = where
            elif isinstance(argument, ast.Name | ast.Attribute):
                # A constant: resolve it where it is used (exc.code and the like forward a
                # code raised elsewhere, and resolve to nothing here).
                module = module or importlib.import_module(_module_name(path))
                owner = module
                if isinstance(argument, ast.Attribute):
                    if not isinstance(argument.value, ast.Name):
                        continue
                    owner = getattr(module, argument.value.id, None)
                    attribute = argument.attr
                else:
                    attribute = argument.id
                value = getattr(owner, attribute, None)
                if isinstance(value, str):
                    found[value] = where
    for name, value in vars(engine).items():
        if name.isupper() and isinstance(value, str):
            found.setdefault(value, "contextproto.protocol.errors")
    return found


@pytest.fixture(scope="module")
def description(django_db_blocker) -> str:
    with django_db_blocker.unblock():
        response = APIClient().get("/api/v1/schema/", {"format": "json"})
    assert response.status_code == 200
    return response.json()["info"]["description"]


def listed(description: str) -> dict[str, int]:
    """The HTTP codes of the description's first table, with their status."""
    rows = re.findall(r"^\| `([a-z0-9_]+)` \| (\d{3}) \|", description, re.MULTILINE)
    return {code: int(status) for code, status in rows}


def listed_apart(description: str) -> set[str]:
    """The codes of the tables without a status: tool results, failed runs (contract §12)."""
    return set(re.findall(r"^\| `([a-z0-9_]+)` \| (?!\d{3} \|)", description, re.MULTILINE))


def test_the_collection_finds_codes_of_every_kind():
    codes = emitted_codes()
    for code in ("invalid_cursor", "not_authenticated", "rate_limited", "maintainer_not_bound"):
        assert code in codes
    assert engine.PROTOCOL_UNKNOWN in codes


def test_every_code_the_api_can_emit_is_in_the_description(description):
    # An HTTP refusal's code in the table with statuses; a code seen only inside tool results
    # or failed runs in the tables apart, without a status it never has (contract §12).
    shown = set(listed(description)) | listed_apart(description)
    missing = {code: where for code, where in emitted_codes().items() if code not in shown}
    assert missing == {}


def test_the_description_lists_each_code_once_per_table_with_its_registered_status(description):
    for table in description.split("\n## ")[1:]:
        rows = re.findall(r"^\| `([a-z0-9_]+)` \|", table, re.MULTILINE)
        assert len(rows) == len(set(rows))
    assert listed(description) == {code: status for code, status, _ in error_codes()}


def test_tool_result_codes_are_listed_apart_from_http_errors(description):
    http = set(listed(description))
    apart = listed_apart(description)
    assert "context_state_stale" in apart and "context_state_stale" not in http
    assert "tool_call_abandoned" in apart and "invalid_arguments" in apart
    assert "provider_unavailable" in apart and "provider_unavailable" not in http
    assert {"not_found", "tool_call_answered", "usage_invalid"} <= http


def test_manage_py_spectacular_describes_the_same_error_codes(description, tmp_path):
    schema = tmp_path / "schema.json"
    call_command("spectacular", "--format", "openapi-json", "--file", str(schema))
    written = json.loads(schema.read_text())["info"]["description"]
    assert written == description
    assert listed(written) == {code: status for code, status, _ in error_codes()}
