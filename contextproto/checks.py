"""Refuse to serve production traffic with the public dev SECRET_KEY (docs/decisions.md)."""

from __future__ import annotations

import os
import sys
from typing import Any

from django.conf import settings
from django.core import checks
from django.core.exceptions import ImproperlyConfigured

DEV_KEY_MESSAGE = (
    "SECRET_KEY is the public dev key. In production set SECRET_KEY to a long random value, "
    "e.g. python -c 'import secrets; print(secrets.token_urlsafe(50))'. For local "
    "development set DEBUG=true or ALLOW_DEV_SECRET_KEY=true."
)


def dev_key_in_production() -> bool:
    """Whether this process would serve on the dev key without having declared development."""
    return (
        settings.SECRET_KEY == settings.DEV_SECRET_KEY
        and not settings.DEBUG
        and not settings.ALLOW_DEV_SECRET_KEY
        and "PYTEST_VERSION" not in os.environ
    )


@checks.register(checks.Tags.security, deploy=True)
def check_secret_key(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    if dev_key_in_production():
        return [checks.Error(DEV_KEY_MESSAGE, id="contextproto.E001")]
    return []


def refuse_dev_key_when_serving() -> None:
    """Raise ImproperlyConfigured when a production server loads the app on the dev key.

    `manage.py runserver` is a development server and is let through (it loads the same
    entry point); so are management commands, which never load it.
    """
    if dev_key_in_production() and "runserver" not in sys.argv:
        raise ImproperlyConfigured(DEV_KEY_MESSAGE)
