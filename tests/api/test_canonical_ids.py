"""Ids are accepted only as the API spells them (issue 23, item 5).

Python's `UUID()` (and DRF's UUIDField) read braces, `urn:uuid:` and other scripts' digits
(fullwidth, Arabic-Indic) as the same id, so a session id written in fullwidth digits reached
the real session. An id in a path is now the 36-character hyphenated form or the 32-hex form the API
issues for runs, ASCII hex in either case; anything else is a 404 (paths) or a 400 naming the
field (bodies).
"""

from __future__ import annotations

import uuid

import pytest

from contextproto.errors import ApplicationError
from contextproto.ids import canonical_uuid, parse_uuid
from tests.api.test_agents_api import GOOD_VERSION, new_agent, new_version

# Digits of other scripts, which int() and UUID() read as 0-9: U+FF10.. and U+0660...
FULLWIDTH = {ord("0") + d: 0xFF10 + d for d in range(10)}
ARABIC_INDIC = {ord("0") + d: 0x0660 + d for d in range(10)}


def foreign_spellings(canonical: str) -> dict[str, str]:
    """Spellings Python's UUID() reads as `canonical` that the API must not."""
    spellings = {
        "braces": "{" + canonical + "}",
        "urn": "urn:uuid:" + canonical,
        "urn_braces": "urn:uuid:{" + canonical.upper() + "}",
        "fullwidth": canonical.translate(FULLWIDTH),
        "arabic_indic": canonical.translate(ARABIC_INDIC),
        "hex_fullwidth": canonical.replace("-", "").translate(FULLWIDTH),
    }
    for name, spelled in spellings.items():
        assert uuid.UUID(spelled) == uuid.UUID(canonical), name  # the trap is real
    return spellings


def own_spellings(canonical: str) -> list[str]:
    """The spellings the API issues or that differ in case only: accepted."""
    return [
        canonical,
        canonical.upper(),
        uuid.UUID(canonical).hex,
        uuid.UUID(canonical).hex.upper(),
    ]


def test_canonical_uuid_takes_the_api_forms_only() -> None:
    value = uuid.UUID("0f8fad5b-d9cb-469f-a165-70867728950e")
    for spelled in own_spellings(str(value)):
        assert canonical_uuid(spelled) == value
    for name, spelled in foreign_spellings(str(value)).items():
        assert canonical_uuid(spelled) is None, name
    for other in ["", " " + str(value), str(value) + "\n", str(value)[:-1], 7, None, value.int]:
        assert canonical_uuid(other) is None, other
    with pytest.raises(ApplicationError) as refused:
        parse_uuid("{" + str(value) + "}", "Session")
    assert (refused.value.status, refused.value.code) == (404, "not_found")


def test_session_paths_resolve_only_the_api_spellings(api_session):
    s = api_session()
    for spelled in own_spellings(s.id):
        response = s.client.get(f"sessions/{spelled}/")
        assert response.status_code == 200, (spelled, response.content)
        assert response.json()["id"] == s.id
    for name, spelled in foreign_spellings(s.id).items():
        for client in (s.client, s.app_client):
            response = client.get(f"sessions/{spelled}/")
            assert response.status_code == 404, (name, response.content)
            assert response.json()["error"]["code"] == "not_found"
        # ...on every endpoint under the session, writes included: nothing is written.
        written = s.client.post(f"sessions/{spelled}/inputs/", {"content": "hi"})
        assert written.status_code == 404, name
        assert s.app_client.post(f"sessions/{spelled}/session-key/rotate/").status_code == 404
    assert s.client.get(s.path("messages/")).json()["messages"] == []


def test_agent_and_agent_version_paths_resolve_only_the_api_spellings(tenant):
    _, client = tenant()
    agent_id = new_agent(client)
    draft = new_version(client, agent_id)
    assert client.get(f"agent-versions/{draft['id'].upper()}/").status_code == 200
    for name, spelled in foreign_spellings(draft["id"]).items():
        response = client.get(f"agent-versions/{spelled}/")
        assert response.status_code == 404, (name, response.content)
        assert client.patch(f"agent-versions/{spelled}/", {"maxTurnsPerRun": 3}).status_code == 404
        assert client.post(f"agent-versions/{spelled}/publish/").status_code == 404
    for name, spelled in foreign_spellings(agent_id).items():
        response = client.post(f"agents/{spelled}/versions/", GOOD_VERSION)
        assert response.status_code == 404, (name, response.content)
    assert client.get(f"agent-versions/{draft['id']}/").json()["maxTurnsPerRun"] != 3


def test_snapshot_paths_resolve_only_the_api_spellings(api_session):
    s = api_session()
    s.input("hi")
    snapshot = s.project()["snapshotId"]
    usage = {"inputTokens": 10, "outputTokens": 2}
    for name, spelled in foreign_spellings(snapshot).items():
        response = s.client.post(s.path(f"snapshots/{spelled}/usage/"), usage)
        assert response.status_code == 404, (name, response.content)
    response = s.client.post(s.path(f"snapshots/{snapshot.upper()}/usage/"), usage)
    assert response.status_code == 200, response.content


@pytest.mark.parametrize("name", ["braces", "urn", "fullwidth", "arabic_indic"])
def test_an_agent_version_id_in_a_body_is_a_400_naming_the_field(tenant, make_version, name):
    app, client = tenant()
    version = make_version(app)
    spelled = foreign_spellings(str(version.id))[name]
    response = client.post("sessions/", {"agentVersionId": spelled, "inputs": {}})
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert error["code"] == "invalid_request"
    assert error["details"]["errors"][0]["field"] == "agentVersionId"
    assert "hex digits" in error["message"]
    # DRF's UUIDField took an integer as UUID(int=...): no more.
    assert client.post("sessions/", {"agentVersionId": version.id.int}).status_code == 400
    accepted = client.post("sessions/", {"agentVersionId": str(version.id).upper()})
    assert accepted.status_code == 201, accepted.content


def test_tool_and_maintainer_ids_in_a_version_body_are_checked_alike(tenant):
    _, client = tenant()
    agent_id = new_agent(client)
    maintainer = new_agent(client, "maintainer")
    for body, field in [
        ({"tools": ["{" + maintainer + "}"]}, "tools"),
        ({"maintainerAgentId": maintainer.translate(FULLWIDTH)}, "maintainerAgentId"),
    ]:
        response = client.post(f"agents/{agent_id}/versions/", {**GOOD_VERSION, **body})
        assert response.status_code == 400, response.content
        assert response.json()["error"]["details"]["errors"][0]["field"].startswith(field)
    response = client.post(
        f"agents/{agent_id}/versions/", {**GOOD_VERSION, "maintainerAgentId": maintainer.upper()}
    )
    assert response.status_code == 201, response.content


def test_snapshot_and_run_ids_in_bodies_must_be_the_api_spellings(api_session):
    s = api_session()
    run_id = s.input("hi")["runId"]
    snapshot = s.project()["snapshotId"]
    call = {"role": "assistant", "kind": "tool_call", "content": "", "toolName": "lookup"}
    for name, spelled in foreign_spellings(snapshot).items():
        response = s.client.post(
            s.path("messages/"), {**call, "toolCallId": f"c-{name}", "snapshotId": spelled}
        )
        assert response.status_code == 400, (name, response.content)
        assert response.json()["error"]["code"] == "snapshot_required"
    for name, spelled in foreign_spellings(str(uuid.UUID(run_id))).items():
        response = s.client.post(s.path("projection/"), {"runId": spelled})
        assert response.status_code == 400, (name, response.content)
        assert response.json()["error"]["code"] == "run_not_found"
    # The run id as the API issued it (32 hex) and its hyphenated form both work.
    for spelled in (run_id, str(uuid.UUID(run_id))):
        assert s.client.post(s.path("projection/"), {"runId": spelled}).status_code == 201
    assert s.client.get(s.path("messages/")).json()["messages"][-1]["kind"] == "input"
