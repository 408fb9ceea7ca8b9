"""WSGI entry point."""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "contextproto.settings")
application = get_wsgi_application()

from contextproto.checks import refuse_dev_key_when_serving  # noqa: E402 (needs settings)

refuse_dev_key_when_serving()
