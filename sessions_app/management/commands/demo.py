"""`manage.py demo`: prepare the demo and print the admin login."""

from __future__ import annotations

import os
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand

DEMO_USERNAME = "admin"


class Command(BaseCommand):
    help = "Create the demo admin login (and, as it grows, the demo scenario) and print it."

    def handle(self, *args: Any, **options: Any) -> None:
        password = os.environ.get("DEMO_ADMIN_PASSWORD", "contextproto-demo")
        user_model = get_user_model()
        user, _ = user_model.objects.get_or_create(
            username=DEMO_USERNAME, defaults={"is_staff": True, "is_superuser": True}
        )
        user.is_staff = user.is_superuser = True
        user.set_password(password)
        user.save()
        self.stdout.write("Admin: http://127.0.0.1:8000/admin/")
        self.stdout.write(f"Login: {DEMO_USERNAME} / {password}")
