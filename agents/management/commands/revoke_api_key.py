"""`manage.py revoke_api_key PREFIX-OR-ID`: revoke one API key at once (requests get 401)."""

from __future__ import annotations

import shlex
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from agents.models import ApiKey, hash_key
from agents.services import KEY_PREFIX_LENGTH, api_key_revoke


def find_key(wanted: str) -> ApiKey:
    """The key named by its id, its prefix (as the admin lists it) or the whole key."""
    if wanted.isascii() and wanted.isdigit():
        found = list(ApiKey.objects.filter(pk=int(wanted)).select_related("application"))
    elif len(wanted) > KEY_PREFIX_LENGTH:
        # A whole key (e.g. pasted from a leak report): match by hash, never store it.
        found = list(ApiKey.objects.filter(key_hash=hash_key(wanted)).select_related("application"))
    else:
        found = list(ApiKey.objects.filter(prefix=wanted).select_related("application")[:10])
    if not found:
        raise CommandError(f"No API key with id or prefix {wanted!r}.")
    if len(found) > 1:
        listed = ", ".join(f"id {k.pk} ({k.application})" for k in found)
        raise CommandError(f"Prefix {wanted!r} names several keys: {listed}. Pass the id.")
    return found[0]


class Command(BaseCommand):
    help = "Revoke an API key given its id or prefix; requests with it get 401 at once."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("key", help="the key's id or prefix (as listed in the admin)")

    def handle(self, *args: Any, **options: Any) -> None:
        key = find_key(options["key"].strip())
        if key.revoked_at is not None:
            self.stdout.write(f"Key {key.prefix}… (id {key.pk}) was already revoked.")
            return
        # An operator may revoke an Application's last key; rotate_api_key issues a new one.
        key = api_key_revoke(api_key=key)
        active = ApiKey.objects.filter(
            application_id=key.application_id, revoked_at__isnull=True
        ).count()
        self.stdout.write(
            f"Revoked key {key.prefix}… (id {key.pk}) of {key.application}; "
            f"{active} active key(s) left."
        )
        if not active:
            name = shlex.quote(key.application.name)
            self.stdout.write(f"Issue a new one with: manage.py rotate_api_key {name}")
