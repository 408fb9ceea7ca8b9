"""The request's thread: every database call of a gateway request runs there."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from asgiref.sync import sync_to_async


async def in_thread[T](function: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Run `function` in the request's thread (Django's per-request thread under ASGI, the
    calling thread under WSGI), where its database connection lives."""
    return await sync_to_async(function, thread_sensitive=True)(*args, **kwargs)
