"""The page at `/` and the admin's "View site" link to it (issue 27, rough edges)."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth import get_user_model

from contextproto.protocol import catalog

HREF = re.compile(r'href="([^"]+)"')


def test_root_says_what_the_service_is_and_links_to_its_parts(client):
    # No django_db mark: a database read would fail this test, so the page answers even while
    # the database is down.
    response = client.get("/")

    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/html")
    text = response.content.decode()
    assert "context protocol service" in text
    links = set(HREF.findall(text))
    for wanted in (
        "/admin/",
        "/api/v1/schema/",
        "/api/v1/schema/?format=json",
        "/api/v1/health/",
        "/api/v1/health/live/",
        "/api/v1/health/ready/",
    ):
        assert wanted in links, wanted
    for version in catalog.all_versions():
        assert f"<code>{version.key}</code>" in text


@pytest.mark.django_db
def test_every_link_of_the_landing_page_answers_without_a_credential(client):
    """The links lead somewhere real: no 404, no 401 (the admin redirects to its login)."""
    text = client.get("/").content.decode()
    for link in sorted(set(HREF.findall(text))):
        response = client.get(link.replace("&amp;", "&"))
        assert response.status_code in (200, 302), (link, response.status_code)
        if response.status_code == 302:
            assert response["Location"].startswith("/admin/login/"), link


def test_the_landing_page_names_only_the_protocols_this_node_serves(client, settings):
    settings.NODE_HIDE_PROTOCOLS = ["unified@3"]
    text = client.get("/").content.decode()
    assert "<code>unified@3</code>" not in text
    assert "<code>unified@2</code>" in text


def test_the_landing_page_takes_no_writes(client):
    response = client.post("/", {})
    assert response.status_code == 405


@pytest.mark.django_db
def test_view_site_in_the_admin_leads_to_the_landing_page(client):
    admin = get_user_model().objects.create_superuser("root", "root@example.com", "pw-for-tests")
    client.force_login(admin)

    index = client.get("/admin/")

    assert index.status_code == 200
    assert index.context["site_url"] == "/"
    view_site = re.search(r'<a href="([^"]+)">View site</a>', index.content.decode())
    assert view_site is not None and view_site.group(1) == "/"
    assert client.get(view_site.group(1)).status_code == 200
