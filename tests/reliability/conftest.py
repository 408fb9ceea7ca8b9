"""Fault tests on PostgreSQL + Redis: real server and worker processes killed under load."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

from tests.servers import current_database_url

# The URL of the test database, for server and worker processes the test starts.
database_url = current_database_url


def call(
    base_url: str, key: str, method: str, path: str, body: object = None, timeout: float = 30
) -> tuple[int, dict]:
    """One request under /api/v1/, no retry: the test wants to see every answer."""
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(
        f"{base_url}/api/v1/{path}",
        data=data,
        method=method,
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, json.loads(response.read() or b"{}")
    except urllib.error.HTTPError as exc:
        raw = exc.read()
        try:
            return exc.code, json.loads(raw or b"{}")
        except ValueError:  # not our JSON: keep the text for the assertion message
            return exc.code, {"raw": raw[:2000].decode(errors="replace")}
