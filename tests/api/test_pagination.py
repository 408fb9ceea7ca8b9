"""Keyset pagination (contextproto.pagination): each list pages through every row exactly once."""

from __future__ import annotations

import pytest

from sessions_app.store.state import kv_commit


def all_pages(client, path: str, field: str, limit: int = 1) -> list:
    rows, cursor, pages = [], None, 0
    while True:
        params = {"limit": limit} | ({"cursor": cursor} if cursor else {})
        response = client.get(path, **params)
        assert response.status_code == 200, response.content
        body = response.json()
        rows += body[field]
        pages += 1
        cursor = body["nextCursor"]
        if cursor is None:
            return rows
        assert pages < 100


def test_kv_pages_in_key_order_and_by_prefix(api_session):
    s = api_session()
    kv_commit(session_id=s.id, writes={f"note/{n}": n for n in range(5)})
    keys = [e["key"] for e in all_pages(s.client, s.path("kv/"), "entries", limit=2)]
    assert keys == sorted(keys) and len(keys) == len(set(keys))
    assert {f"note/{n}" for n in range(5)} <= set(keys)
    response = s.client.get(s.path("kv/"), prefix="note/", limit=10)
    assert [e["key"] for e in response.json()["entries"]] == [f"note/{n}" for n in range(5)]


def test_windows_page_in_creation_order(api_session):
    s = api_session()
    s.input("one")
    s.tool("context_window_open", windowId="b", goal="g", input="i", expectedWindowId="main")
    s.tool("context_window_open", windowId="a", goal="g", input="i", expectedWindowId="b")
    windows = all_pages(s.client, s.path("windows/"), "windows")
    assert [w["windowId"] for w in windows] == ["main", "b", "a"]
    assert [w["active"] for w in windows] == [False, False, True]


def test_snapshots_page_newest_first(api_session):
    s = api_session()
    s.input("one")
    made = []
    for text in ("two", "three"):
        made.append(s.project()["snapshotId"])
        s.input(text)
    made.append(s.project()["snapshotId"])
    listed = [v["snapshotId"] for v in all_pages(s.client, s.path("snapshots/"), "snapshots")]
    assert listed == made[::-1]


def test_api_keys_page_in_creation_order(tenant):
    _app, client = tenant("keys")
    for _ in range(3):
        assert client.post("api-keys/").status_code == 201
    keys = all_pages(client, "api-keys/", "apiKeys")
    assert [k["id"] for k in keys] == sorted(k["id"] for k in keys) and len(keys) == 4


@pytest.mark.parametrize("endpoint", ["windows/", "folds/", "snapshots/", "kv/"])
def test_a_bad_limit_is_refused_naming_it(api_session, endpoint):
    s = api_session()
    response = s.client.get(s.path(endpoint), limit=0)
    assert response.status_code == 400
    assert response.json()["error"]["details"]["field"] == "limit"
