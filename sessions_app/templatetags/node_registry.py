"""`{% node_registry as registry %}`: the live nodes and their catalog skew, for admin pages."""

from __future__ import annotations

from typing import Any

from django import template

from sessions_app import nodes

register = template.Library()


@register.simple_tag
def node_registry() -> dict[str, Any]:
    """Return `nodes.registry_report()` (never raises: Redis errors are reported in it)."""
    return nodes.registry_report()
