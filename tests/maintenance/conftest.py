from __future__ import annotations

import pytest


@pytest.fixture
def with_maintainer(tenant, make_version):
    """A unified@2 session whose AgentVersion binds a scripted maintainer Agent."""

    def build(steps: list[dict], *, page_size: int = 10, interactions: int = 12):
        from tests.conftest import KeyClient, SessionHandle

        app, client = tenant("maintained")
        maintainer = make_version(
            app,
            name="context-maintainer",
            provider="scripted",
            model_config={"steps": steps},
            protocol="prefix",
        )
        version = make_version(
            app,
            options={"pageSize": page_size},
            max_input_tokens=1000,
            maintainer_agent=maintainer.agent,
        )
        created = client.post("sessions/", {"agentVersionId": str(version.id)}).json()
        s = SessionHandle(app, client, KeyClient(created["sessionKey"]), created["id"], version)
        s.input("prepare the quote; budget 5000")
        for n in range(interactions):
            s.host_tool_work(f"lookup{n}", "x" * 400)
        return s

    return build
