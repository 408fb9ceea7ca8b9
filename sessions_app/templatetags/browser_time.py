"""`{{ value|stamp }}`: a datetime or an ISO string (a RawMessage's `created_at`) rendered
like every other timestamp of the admin (DATETIME_FORMAT, with seconds)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django import template
from django.utils import formats, timezone

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
