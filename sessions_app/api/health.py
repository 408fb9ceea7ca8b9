"""Health probes for load balancers and orchestrators: `health/` (node role, catalog
fingerprint, dependencies, the live nodes), `health/live/` and `health/ready/`."""

from __future__ import annotations

from django.conf import settings
from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from sessions_app import nodes
from sessions_app.api import shapes
from sessions_app.reads import health


class _Probe(APIView):
    # Probes answer load balancers and orchestrators: no key, no rate limit, and a stray
    # Authorization header must not turn them into a 401.
    authentication_classes: list = []
    throttle_classes: list = []


class HealthApi(_Probe):
    """Node role, catalog fingerprint, reachability of the database and the cache/broker, and
    the live nodes with `skew: true` when their catalogs differ."""

    @extend_schema(auth=[], responses={200: shapes.Health, 503: shapes.Health})
    def get(self, request: Request) -> Response:
        checks = health.dependency_checks()
        healthy = all(v == "ok" for v in checks.values())
        return Response(
            {
                "status": "ok" if healthy else "degraded",
                "role": settings.NODE_ROLE,
                "catalogFingerprint": nodes.local_fingerprint(),
                "redis": bool(settings.REDIS_URL),
                "checks": checks,
                # Skew is reported, not a 503: during a rolling deploy every node would
                # otherwise leave the load balancer at once.
                **nodes.registry_report(),
            },
            status=200 if healthy else 503,
        )


class HealthLiveApi(_Probe):
    """Liveness: the process answers requests (restart it when this fails)."""

    @extend_schema(auth=[], responses={200: shapes.HealthLive})
    def get(self, request: Request) -> Response:
        return Response({"status": "ok"})


class HealthReadyApi(_Probe):
    """Readiness: database and cache reachable, every migration applied (route traffic here)."""

    @extend_schema(auth=[], responses={200: shapes.HealthReady, 503: shapes.HealthReady})
    def get(self, request: Request) -> Response:
        checks = health.dependency_checks(migrations=True)
        ready = all(v == "ok" for v in checks.values())
        return Response(
            {"status": "ok" if ready else "not_ready", "checks": checks},
            status=200 if ready else 503,
        )
