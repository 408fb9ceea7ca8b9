"""`manage.py create_application NAME`: a new Application; its API key is the last line."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from agents.models import Application
from agents.services import application_create


class Command(BaseCommand):
    help = "Create an Application and print a new API key as the last line of output."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name")

    def handle(self, *args: Any, **options: Any) -> None:
        name = options["name"].strip()
        if not name:
            raise CommandError("NAME must not be empty.")
        if Application.objects.filter(name=name).exists():
            raise CommandError(f"An Application named {name!r} already exists.")
        application, key = application_create(name=name)
        self.stdout.write(f"Created Application {application.name} ({application.id}).")
        self.stdout.write("API key (shown once; send it as 'Authorization: Bearer <key>'):")
        self.stdout.write(key)
