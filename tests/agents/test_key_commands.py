"""`manage.py revoke_api_key` and `manage.py rotate_api_key`, and the key services under them."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from agents.models import ApiKey, Application, hash_key
from agents.services import api_key_issue, api_key_revoke, application_create
from contextproto.errors import ApplicationError
from tests.conftest import KeyClient


def run(*args: str) -> list[str]:
    out = StringIO()
    call_command(*args, stdout=out)
    return out.getvalue().strip().splitlines()


@pytest.fixture
def acme(db) -> tuple[Application, str]:
    return application_create(name="Acme Corp")


def test_rotate_prints_the_new_key_last_and_revokes_the_old_ones(acme):
    _, old = acme
    new = run("rotate_api_key", "Acme Corp")[-1]
    assert ApiKey.objects.get(key_hash=hash_key(new)).revoked_at is None
    assert ApiKey.objects.get(key_hash=hash_key(old)).revoked_at is not None
    assert KeyClient(old).get("api-keys/").status_code == 401
    assert KeyClient(new).get("api-keys/").status_code == 200


def test_rotate_finds_the_application_by_id_and_can_keep_the_old_keys(acme):
    application, old = acme
    new = run("rotate_api_key", str(application.id), "--keep-old")[-1]
    assert ApiKey.objects.filter(application=application, revoked_at__isnull=True).count() == 2
    assert KeyClient(old).get("api-keys/").status_code == 200
    assert KeyClient(new).get("api-keys/").status_code == 200


def test_rotate_refuses_an_unknown_application(db):
    with pytest.raises(CommandError, match="No Application"):
        run("rotate_api_key", "Nobody")


def test_revoke_by_prefix_gets_401_at_once(acme):
    _, raw = acme
    key = ApiKey.objects.get(key_hash=hash_key(raw))
    lines = run("revoke_api_key", key.prefix)
    assert "0 active key(s) left" in lines[0] and "rotate_api_key 'Acme Corp'" in lines[-1]
    assert ApiKey.objects.get(pk=key.pk).revoked_at is not None
    assert KeyClient(raw).get("api-keys/").status_code == 401


def test_revoke_by_id_or_by_the_whole_key(acme):
    application, raw = acme
    other, _ = api_key_issue(application=application)
    run("revoke_api_key", str(other.pk))
    run("revoke_api_key", raw)
    assert not ApiKey.objects.filter(application=application, revoked_at__isnull=True).exists()


def test_revoke_refuses_an_ambiguous_prefix_and_an_unknown_key(acme):
    application, _ = acme
    shared = ApiKey.objects.create(application=application, key_hash="0" * 64, prefix="cpa_same")
    ApiKey.objects.create(application=application, key_hash="1" * 64, prefix="cpa_same")
    with pytest.raises(CommandError, match="several keys"):
        run("revoke_api_key", "cpa_same")
    with pytest.raises(CommandError, match="No API key"):
        run("revoke_api_key", "cpa_nothing")
    assert ApiKey.objects.get(pk=shared.pk).revoked_at is None


def test_the_service_keeps_one_key_only_when_asked(acme):
    _, raw = acme
    key = ApiKey.objects.get(key_hash=hash_key(raw))
    with pytest.raises(ApplicationError) as refused:
        api_key_revoke(api_key=key, keep_one_active=True)
    assert (refused.value.code, refused.value.status) == ("last_active_api_key", 409)
    assert api_key_revoke(api_key=key).revoked_at is not None
