"""Filters of the session browser.

`{{ value|stamp }}`: a datetime or an ISO string (a RawMessage's `created_at`) rendered like
every other timestamp of the admin (DATETIME_FORMAT, with seconds). `{{ message|said:400 }}`:
what a raw message says, flattened as the engine does (text parts, image markers) and cut.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django import template
from django.utils import formats, timezone

from contextproto.protocol.messages import RawMessage, content_text
from sessions_app.admin_views.common import preview

register = template.Library()


@register.filter
def stamp(value: Any) -> str:
    """`value` in the active time zone with seconds; "—" for nothing, unchanged if unparsable."""
    if value in (None, ""):
        return "—"
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value)
        except ValueError:
            return value
    if not isinstance(value, datetime):
        return str(value)
    if timezone.is_aware(value):
        value = timezone.localtime(value)
    return formats.date_format(value, "DATETIME_FORMAT")


@register.filter
def thousands(value: Any) -> str:
    """An integer with thousands separators ("1,234,567"); anything else unchanged."""
    return f"{value:,}" if isinstance(value, int) else str(value)


@register.filter
def said(message: RawMessage, limit: int = 400) -> str:
    """The message's content as text, cut to `limit` characters (saying how long it was)."""
    return preview(content_text(message.content), int(limit))
