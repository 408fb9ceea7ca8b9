"""An application key rotates and revokes its own Application's API keys (api-keys/)."""

from __future__ import annotations

from agents import services
from agents.models import ApiKey, hash_key
from tests.conftest import KeyClient

CHALLENGE = 'Bearer realm="api"'


def create_key(client: KeyClient) -> dict:
    response = client.post("api-keys/")
    assert response.status_code == 201, response.content
    return response.json()


def test_a_new_key_is_shown_once_and_works(tenant):
    app, client = tenant()
    created = create_key(client)
    assert set(created) == {"id", "prefix", "createdAt", "revokedAt", "key"}
    assert created["key"].startswith(created["prefix"]) and created["revokedAt"] is None
    stored = ApiKey.objects.get(pk=created["id"])
    assert stored.application == app and stored.key_hash == hash_key(created["key"])
    assert KeyClient(created["key"]).get("api-keys/").status_code == 200


def test_the_list_shows_every_key_of_the_application_but_never_a_key(tenant):
    _, client = tenant()
    created = create_key(client)
    listed = client.get("api-keys/").json()
    assert [k["id"] for k in listed["apiKeys"]] == sorted(
        ApiKey.objects.values_list("id", flat=True)
    )
    assert all(set(k) == {"id", "prefix", "createdAt", "revokedAt"} for k in listed["apiKeys"])
    assert created["key"] not in str(listed) and client.key not in str(listed)
    assert listed["nextCursor"] is None


def test_the_list_pages_with_a_cursor(tenant):
    _, client = tenant()
    for _ in range(2):
        create_key(client)
    first = client.get("api-keys/", limit=2).json()
    assert len(first["apiKeys"]) == 2 and first["nextCursor"]
    second = client.get("api-keys/", limit=2, cursor=first["nextCursor"]).json()
    ids = [k["id"] for k in first["apiKeys"] + second["apiKeys"]]
    assert ids == sorted(ApiKey.objects.values_list("id", flat=True))
    assert second["nextCursor"] is None


def test_a_revoked_key_gets_401_with_a_bearer_challenge_at_once(tenant):
    _, client = tenant()
    old_id = client.get("api-keys/").json()["apiKeys"][0]["id"]
    new = KeyClient(create_key(client)["key"])
    revoked = new.post(f"api-keys/{old_id}/revoke/")
    assert revoked.status_code == 200, revoked.content
    assert revoked.json()["revokedAt"] is not None
    refused = client.get("api-keys/")
    assert refused.status_code == 401
    assert refused.json()["error"]["code"] == "not_authenticated"
    assert refused["WWW-Authenticate"] == CHALLENGE
    assert new.get("api-keys/").status_code == 200


def test_a_key_may_revoke_itself_while_another_stays_active(tenant):
    _, client = tenant()
    own_id = client.get("api-keys/").json()["apiKeys"][0]["id"]
    create_key(client)
    assert client.post(f"api-keys/{own_id}/revoke/").status_code == 200
    assert client.get("api-keys/").status_code == 401


def test_revoking_the_last_active_key_is_refused(tenant):
    _, client = tenant()
    own_id = client.get("api-keys/").json()["apiKeys"][0]["id"]
    refused = client.post(f"api-keys/{own_id}/revoke/")
    assert refused.status_code == 409
    assert refused.json()["error"]["code"] == "last_active_api_key"
    assert ApiKey.objects.get(pk=own_id).revoked_at is None
    assert client.get("api-keys/").status_code == 200


def test_revoking_twice_keeps_the_first_revocation_time(tenant):
    _, client = tenant()
    other = create_key(client)
    first = client.post(f"api-keys/{other['id']}/revoke/").json()
    again = client.post(f"api-keys/{other['id']}/revoke/")
    assert again.status_code == 200 and again.json()["revokedAt"] == first["revokedAt"]


def test_active_keys_are_capped(tenant):
    _, client = tenant()
    for _ in range(services.MAX_ACTIVE_API_KEYS - 1):
        create_key(client)
    refused = client.post("api-keys/")
    assert refused.status_code == 409
    assert refused.json()["error"]["code"] == "too_many_api_keys"


def test_another_applications_key_and_a_session_key_reach_no_key(tenant, api_session):
    handle = api_session()
    victim_id = handle.app.api_keys.get().pk
    _, stranger = tenant("Stranger")
    for client in (stranger, handle.client):
        for method, path in [
            ("post", f"api-keys/{victim_id}/revoke/"),
            ("post", "api-keys/999999/revoke/"),
            ("post", "api-keys/not-a-number/revoke/"),
        ]:
            response = getattr(client, method)(path)
            assert response.status_code == 404, (path, response.content)
            assert response.json()["error"]["code"] == "not_found"
    assert handle.client.get("api-keys/").status_code == 404
    assert handle.client.post("api-keys/").status_code == 404
    assert stranger.get("api-keys/").json()["apiKeys"][0]["id"] != victim_id
    assert ApiKey.objects.get(pk=victim_id).revoked_at is None
    assert handle.app.api_keys.count() == 1


def test_unknown_fields_in_the_body_are_refused(tenant):
    _, client = tenant()
    response = client.post("api-keys/", {"name": "ci"})
    assert response.status_code == 400
    assert response.json()["error"]["details"]["errors"][0]["code"] == "unknown_field"
