"""The admin index warns in red while the live nodes carry different catalogs (contract §3)."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User

from contextproto.protocol import catalog
from sessions_app import nodes

FULL = ["prefix@2", "unified@1", "unified@2", "unified@3"]


def node(role: str, pid: int, fingerprint: str, protocols: list[str], host="node-a") -> dict:
    return {
        "role": role,
        "host": host,
        "pid": pid,
        "codeVersion": nodes.code_version(),
        "catalogFingerprint": fingerprint,
        "protocols": protocols,
    }


@pytest.fixture
def staff(client, db):
    client.force_login(User.objects.create_user("operator", password="pw", is_staff=True))
    return client


def test_skewed_nodes_put_a_red_banner_on_the_admin_index(staff, monkeypatch):
    hidden = catalog.fingerprint_of(catalog.all_versions()[:3])
    monkeypatch.setattr(
        nodes,
        "live_nodes",
        lambda: [
            node("api", 11, catalog.fingerprint(), FULL),
            node("worker", 12, hidden, FULL[:3], host="<b>evil</b>"),
        ],
    )
    page = staff.get("/admin/")
    assert page.status_code == 200
    html = page.content.decode()
    assert 'id="node-skew-banner"' in html and "background: #ba2121" in html
    assert "protocol_unknown_on_worker" in html
    banner = html[html.index('id="node-skew-banner"') : html.index("</div>", html.index("skew"))]
    assert hidden[:12] in banner and catalog.fingerprint()[:12] in banner
    assert "prefix@2, unified@1, unified@2:" in banner
    assert "worker &lt;b&gt;evil&lt;/b&gt;:12" in banner  # node names are escaped
    assert "<h1>Dashboard</h1>" in html and "contextproto" in html  # the index, branded


def test_agreeing_nodes_show_no_banner(staff, monkeypatch):
    monkeypatch.setattr(
        nodes, "live_nodes", lambda: [node("worker", 12, catalog.fingerprint(), FULL)]
    )
    html = staff.get("/admin/").content.decode()
    assert "node-skew-banner" not in html and "<h1>Dashboard</h1>" in html
