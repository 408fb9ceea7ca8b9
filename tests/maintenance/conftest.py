from __future__ import annotations

import pytest

from tests.conftest import KeyClient, SessionHandle

# The protected part of a unified@2 view (system prompt with the protocol prompt, header,
# tool schemas) is about 3400 estimated tokens, so a smaller maxInputTokens is refused as
# context_capacity_exceeded. These tests keep the small 250-token uncompressed tail they
# were written with by scaling the tail share to the larger limit.
MAX_INPUT_TOKENS = 4000
TAIL_TOKENS = 250


@pytest.fixture(autouse=True)
def _small_tail(settings):
    settings.MAINTENANCE_TAIL_SHARE = TAIL_TOKENS / MAX_INPUT_TOKENS


@pytest.fixture
def with_maintainer(tenant, make_version):
    """A unified@2 session whose AgentVersion binds a scripted maintainer Agent."""

    def build(steps: list[dict], *, page_size: int = 10, interactions: int = 12):
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
            max_input_tokens=MAX_INPUT_TOKENS,
            maintainer_agent=maintainer.agent,
        )
        created = client.post("sessions/", {"agentVersionId": str(version.id)}).json()
        s = SessionHandle(app, client, KeyClient(created["sessionKey"]), created["id"], version)
        s.input("prepare the quote; budget 5000")
        for n in range(interactions):
            s.host_tool_work(f"lookup{n}", "x" * 400)
        return s

    return build
