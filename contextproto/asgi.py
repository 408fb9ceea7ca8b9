"""ASGI entry point."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "contextproto.settings")
application = get_asgi_application()

from contextproto.checks import refuse_dev_key_when_serving  # noqa: E402 (needs settings)

refuse_dev_key_when_serving()
