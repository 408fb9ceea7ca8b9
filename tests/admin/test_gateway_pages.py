"""The admin says what came through the gateway (issue 38 item 5): a session's overview and a
run's timeline name the client API and the client's User-Agent."""

from __future__ import annotations

import json

from django.test import Client

from agents.services import application_create
from sessions_app.models import Run


def test_the_overview_and_the_timeline_name_the_gateway_client(make_version, superuser, client):
    application, key = application_create(name="Gateway pages")
    make_version(
        application,
        name="helper",
        provider="scripted",
        model_config={"steps": [{"text": "Hello there."}], "wireFormat": "anthropic-messages"},
        system_prompt="Help.\n{{context_protocol}}",
    )
    reply = Client().post(
        "/gateway/anthropic/v1/messages",
        data=json.dumps(
            {"model": "helper", "max_tokens": 100, "messages": [{"role": "user", "content": "hi"}]}
        ),
        content_type="application/json",
        HTTP_X_API_KEY=key,
        HTTP_USER_AGENT="claude-cli/2.1.332 (external, sdk-cli)",
    )
    assert reply.status_code == 200, reply.content
    session = reply["X-Contextproto-Session"]
    run = Run.objects.get(session_id=session)
    assert (run.via_gateway, run.client_api) == (True, "anthropic")

    client.force_login(superuser)
    overview = client.get(f"/admin/sessions_app/session/{session}/browse/").content.decode()
    assert 'id="driven-by"' in overview
    assert "Anthropic Messages" in overview and "claude-cli/2.1.332" in overview
    timeline = client.get(f"/admin/sessions_app/session/{session}/browse/runs/{run.pk}/")
    page = timeline.content.decode()
    assert 'id="driven-by-gateway"' in page, page[:2000]
    assert "a gateway client: Anthropic Messages" in page and "claude-cli/2.1.332" in page
