"""Production settings: `check --deploy` is clean, and the public dev SECRET_KEY never serves.

Each case runs manage.py in a fresh process: settings are read once, at import.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# What decides development vs production; the parent's values must not leak in.
CONTROLLED = (
    "SECRET_KEY",
    "DEBUG",
    "ALLOW_DEV_SECRET_KEY",
    "PYTEST_VERSION",
    "HTTPS",
    "HSTS_SECONDS",
    "HSTS_INCLUDE_SUBDOMAINS",
    "HSTS_PRELOAD",
    "ALLOWED_HOSTS",
    "DATABASE_URL",
    "REDIS_URL",
    "DJANGO_ALLOW_ASYNC_UNSAFE",  # set by the browser tests' conftest; check --deploy flags it
    "DATABASE_POOL_SIZE",
)


def manage(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if k not in CONTROLLED}
    clean.update(DJANGO_SETTINGS_MODULE="contextproto.settings", VAR_DIR=str(tmp_path), **env)
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=clean,
        capture_output=True,
        text=True,
        timeout=120,
    )


PRODUCTION = {
    "SECRET_KEY": secrets.token_urlsafe(50),
    "HTTPS": "true",
    "ALLOWED_HOSTS": "contextproto.example.com",
}


def test_check_deploy_is_clean_with_production_settings(tmp_path):
    result = manage(tmp_path, "check", "--deploy", "--fail-level", "WARNING", **PRODUCTION)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "System check identified no issues" in result.stdout, result.stdout + result.stderr


def test_check_deploy_names_what_plain_http_leaves_open(tmp_path):
    plain = {**PRODUCTION, "HTTPS": "false"}
    result = manage(tmp_path, "check", "--deploy", **plain)
    for check in ("security.W004", "security.W008", "security.W012", "security.W016"):
        assert check in result.stderr, result.stderr


def test_the_dev_secret_key_fails_the_deploy_check_with_debug_off(tmp_path):
    result = manage(tmp_path, "check", "--deploy")
    assert result.returncode != 0
    assert "contextproto.E001" in result.stderr, result.stderr
    assert "ALLOW_DEV_SECRET_KEY=true" in result.stderr


@pytest.mark.parametrize("entry_point", ["contextproto.asgi", "contextproto.wsgi"])
def test_a_production_server_refuses_to_load_the_app_on_the_dev_key(tmp_path, entry_point):
    clean = {k: v for k, v in os.environ.items() if k not in CONTROLLED}
    clean.update(VAR_DIR=str(tmp_path))
    result = subprocess.run(
        [sys.executable, "-c", f"import {entry_point}"],
        cwd=ROOT,
        env=clean,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode != 0
    assert "ImproperlyConfigured: SECRET_KEY is the public dev key" in result.stderr


def test_management_commands_still_run_on_the_dev_key(tmp_path):
    # Hosts and operators script `manage.py create_application NAME` (SPEC 9.1).
    result = manage(tmp_path, "check")
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize(
    "env",
    [{"DEBUG": "true"}, {"ALLOW_DEV_SECRET_KEY": "true"}, {"PYTEST_VERSION": "9"}],
    ids=["debug", "explicit-flag", "under-pytest"],
)
def test_development_may_use_the_dev_secret_key(tmp_path, env):
    result = manage(tmp_path, "check", **env)
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize(
    ("url", "size", "pool"),
    [
        (
            "postgres://postgres@127.0.0.1:5432/x",
            "6",
            {"min_size": 1, "max_size": 6, "timeout": 10},
        ),
        ("postgres://postgres@127.0.0.1:5432/x", "0", None),
        ("sqlite:///{tmp}/x.sqlite3", "6", None),
    ],
)
def test_database_pool_size_turns_on_the_postgresql_connection_pool(tmp_path, url, size, pool):
    shown = manage(
        tmp_path,
        "shell",
        "-c",
        "from django.conf import settings; import json; "
        "print(json.dumps(settings.DATABASES['default'].get('OPTIONS', {}).get('pool')))",
        DATABASE_URL=url.format(tmp=tmp_path),
        DATABASE_POOL_SIZE=size,
        ALLOW_DEV_SECRET_KEY="true",
    )
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout.strip().splitlines()[-1]) == pool
