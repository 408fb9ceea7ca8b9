"""`manage.py rotate_api_key APPLICATION`: a new API key, the old ones revoked; the key is
the last line of the output."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from django.core.management.base import BaseCommand, CommandError, CommandParser

from agents.models import Application
from agents.services import api_key_issue, application_keys_rotate
from contextproto.errors import ApplicationError


def find_application(wanted: str) -> Application:
    """The Application named by its name or its id."""
    try:
        by_id = Application.objects.filter(pk=UUID(wanted)).first()
    except ValueError:
        by_id = None
    found = by_id or Application.objects.filter(name=wanted).first()
    if found is None:
        raise CommandError(f"No Application with name or id {wanted!r}.")
    return found


class Command(BaseCommand):
    help = (
        "Issue a new API key for an Application and revoke its other keys (--keep-old keeps "
        "them); the new key is the last line of output."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("application", help="the Application's name or id")
        parser.add_argument(
            "--keep-old",
            action="store_true",
            help="keep the existing keys active (revoke them later with revoke_api_key)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        application = find_application(options["application"].strip())
        try:
            if options["keep_old"]:
                key, raw = api_key_issue(application=application)
                revoked = 0
            else:
                key, raw, revoked = application_keys_rotate(application=application)
        except ApplicationError as exc:
            raise CommandError(exc.message) from exc
        self.stdout.write(
            f"New key {key.prefix}… (id {key.pk}) for {application.name}; revoked {revoked} "
            "old key(s)."
        )
        self.stdout.write("API key (shown once; send it as 'Authorization: Bearer <key>'):")
        self.stdout.write(raw)
