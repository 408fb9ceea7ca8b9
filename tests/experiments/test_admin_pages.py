"""The admin's experiment pages: a list of reports, one report with links into the browser."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse

from sessions_app.admin_views import url

pytestmark = pytest.mark.django_db


@pytest.fixture
def small_report(example_plan: dict[str, Any], run_plan: Any) -> dict[str, Any]:
    example_plan["groups"] = [g for g in example_plan["groups"] if g["id"] in ("A", "v2")]
    example_plan["stages"] = example_plan["stages"][:1]
    example_plan["stages"][0]["sessions"] = 1
    for stage_id in ("stage2", "stage3"):
        del example_plan["scripted"]["stages"][stage_id]
    report, _ = run_plan(example_plan)
    return report


def _user(client: Any, *, superuser: bool) -> None:
    user = get_user_model().objects.create_user(
        "op", password="pw", is_staff=True, is_superuser=superuser
    )
    client.force_login(user)


def test_the_list_shows_every_report_and_its_outcomes(client: Any, small_report: dict) -> None:
    _user(client, superuser=True)
    page = client.get(reverse("admin:sessions_app_experiments"))
    assert page.status_code == 200
    html = page.content.decode()
    assert small_report["outDir"] in html
    assert "scripted rehearsal" in html
    assert "v2: failed stage1" in html


def test_a_report_links_each_run_to_its_session_and_snapshots(
    client: Any, small_report: dict
) -> None:
    _user(client, superuser=True)
    page = client.get(reverse("admin:sessions_app_experiment", args=[small_report["outDir"]]))
    assert page.status_code == 200
    html = page.content.decode()
    assert "not a model result" in html
    # Input tokens by kind (the scripted model reports no cache); no prices, no cost column.
    tokens = small_report["groups"][0]["tokens"]
    assert f"input uncached {tokens['input']}, cache read 0, cache written 0" in html
    assert "<th>Cost</th>" not in html
    session = small_report["groups"][0]["stages"][0]["sessions"][0]
    run = session["runs"][0]
    assert url("overview", session["sessionId"]) in html
    assert url("snapshots", session["sessionId"]) in html
    assert url("snapshot", session["sessionId"], run["snapshotIds"][0]) in html
    assert client.get(url("overview", session["sessionId"])).status_code == 200


def test_experiment_pages_are_for_superusers_only(client: Any, small_report: dict) -> None:
    _user(client, superuser=False)
    assert client.get(reverse("admin:sessions_app_experiments")).status_code == 403
    detail = reverse("admin:sessions_app_experiment", args=[small_report["outDir"]])
    assert client.get(detail).status_code == 403


def test_an_unknown_or_unsafe_report_name_is_not_found(client: Any, reports_dir: Any) -> None:
    _user(client, superuser=True)
    for name in ("absent", "..", ".hidden"):
        page = client.get(reverse("admin:sessions_app_experiment", args=[name]))
        assert page.status_code == 404, name
