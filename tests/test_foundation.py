"""Project-level promises: a pure engine, a usable CLI key, one error shape."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import tomllib
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command
from django.test import override_settings
from rest_framework.response import Response
from rest_framework.test import APIRequestFactory
from rest_framework.views import APIView

from agents.models import ApiKey, Application, hash_key

ROOT = Path(__file__).resolve().parent.parent
FORBIDDEN = ("django", "rest_framework", "celery", "agents", "sessions_app", "redis", "psycopg")


# Pure Python: the engine and cache economics beside it.
PURE_PACKAGES = ("protocol", "economics")


def test_engine_imports_nothing_from_django_or_the_apps():
    paths = [p for name in PURE_PACKAGES for p in (ROOT / "contextproto" / name).rglob("*.py")]
    assert any(p.name == "cache_sim.py" for p in paths)
    for path in paths:
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            for name in names:
                assert name.split(".")[0] not in FORBIDDEN, f"{path.name} imports {name}"


@pytest.mark.parametrize("package", PURE_PACKAGES)
def test_importing_the_engine_loads_no_django_module(package):
    code = "\n".join(
        [
            "import importlib, pkgutil, sys",
            f"import contextproto.{package} as p",
            "for m in pkgutil.iter_modules(p.__path__):",
            "    importlib.import_module(p.__name__ + '.' + m.name)",
            "print(len(list(pkgutil.iter_modules(p.__path__))))",
            f"print(sorted(n for n in sys.modules if n.split('.')[0] in {FORBIDDEN!r}))",
        ]
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    count, loaded = out.stdout.strip().splitlines()
    assert int(count) > 5 and loaded == "[]"


# Every flag `mypy --strict` turns on that a per-module section can set (warn_redundant_casts
# is global).
STRICT_FLAGS = {
    "disallow_any_generics": True,
    "disallow_subclassing_any": True,
    "disallow_untyped_calls": True,
    "disallow_untyped_defs": True,
    "disallow_incomplete_defs": True,
    "disallow_untyped_decorators": True,
    "warn_return_any": True,
    "no_implicit_reexport": True,
}


def test_type_check_is_strict_on_the_engine_and_hides_no_module():
    mypy = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]
    assert mypy["warn_redundant_casts"] and mypy["warn_unused_ignores"]
    assert mypy["check_untyped_defs"] and "ignore_errors" not in mypy
    assert "ignore-without-code" in mypy["enable_error_code"]
    overrides = mypy["overrides"]
    for package in PURE_PACKAGES:
        engine = [o for o in overrides if f"contextproto.{package}.*" in o["module"]]
        assert len(engine) == 1 and STRICT_FLAGS.items() <= engine[0].items()
    # No module's errors are hidden: the admin split and the labs/ move typed the last ones
    # (issue 26).
    assert [o["module"] for o in overrides if o.get("ignore_errors")] == []
    assert {"contextproto", "agents", "sessions_app", "labs"} <= set(mypy["files"])
    lint = (ROOT / "Makefile").read_text().split("\nlint:", 1)[1].split("\n\n", 1)[0]
    assert "$(VENV)/bin/mypy\n" in lint and "--strict" in lint
    assert all(f"contextproto/{package}" in lint for package in PURE_PACKAGES)


def test_create_application_prints_the_key_as_its_last_line(db):
    out = StringIO()
    call_command("create_application", "Globex", stdout=out)
    key = out.getvalue().strip().splitlines()[-1]
    application = Application.objects.get(name="Globex")
    stored = ApiKey.objects.get(application=application)
    assert stored.key_hash == hash_key(key)
    assert key not in stored.key_hash and stored.key_hash != key


class EchoApi(APIView):
    def post(self, request):
        return Response({"size": len(json.dumps(request.data))})


@override_settings(DATA_UPLOAD_MAX_MEMORY_SIZE=1000)
def test_oversized_body_is_a_413_in_the_error_shape():
    factory = APIRequestFactory()
    request = factory.post("/x", {"blob": "a" * 5000}, format="json")
    response = EchoApi.as_view()(request)
    assert response.status_code == 413
    assert response.data["error"]["code"] == "request_too_large"


def test_malformed_json_is_a_400_in_the_error_shape():
    factory = APIRequestFactory()
    request = factory.post("/x", "{not json", content_type="application/json")
    response = EchoApi.as_view()(request)
    assert response.status_code == 400
    assert set(response.data["error"]) == {"code", "message", "details"}
