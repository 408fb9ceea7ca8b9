"""Write paths for Applications and their keys (AgentVersion services join with the API issue)."""

from __future__ import annotations

import secrets

from django.db import transaction

from agents.models import ApiKey, Application, hash_key

APPLICATION_KEY_PREFIX = "cpa_"


def generate_key(prefix: str) -> str:
    return prefix + secrets.token_urlsafe(32)


@transaction.atomic
def application_key_issue(*, application: Application) -> str:
    """Create a new API key for `application`; return the raw key (stored only hashed)."""
    raw = generate_key(APPLICATION_KEY_PREFIX)
    ApiKey.objects.create(application=application, key_hash=hash_key(raw), prefix=raw[:10])
    return raw


@transaction.atomic
def application_create(*, name: str) -> tuple[Application, str]:
    """Create an Application and its first API key; return both (the key in clear, once)."""
    application = Application.objects.create(name=name)
    return application, application_key_issue(application=application)
