"""Thin API views of the sessions app."""

from __future__ import annotations

from django.conf import settings
from django.core.cache import cache
from django.db import connection
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView


class HealthApi(APIView):
    """Node role and reachability of the database and the cache/broker."""

    def get(self, request: Request) -> Response:
        checks: dict[str, str] = {}
        try:
            with connection.cursor() as cursor:
                cursor.execute("SELECT 1")
            checks["database"] = "ok"
        except Exception as exc:  # report, don't crash: health must answer
            checks["database"] = f"error: {exc.__class__.__name__}"
        try:
            cache.set("health:ping", "1", 5)
            checks["cache"] = "ok" if cache.get("health:ping") == "1" else "error"
        except Exception as exc:
            checks["cache"] = f"error: {exc.__class__.__name__}"
        healthy = all(v == "ok" for v in checks.values())
        return Response(
            {
                "status": "ok" if healthy else "degraded",
                "role": settings.NODE_ROLE,
                "redis": bool(settings.REDIS_URL),
                "checks": checks,
            },
            status=200 if healthy else 503,
        )
