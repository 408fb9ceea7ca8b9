"""Gauges of the sessions app's state, read at scrape time (contextproto.metrics serves them):
maintenance jobs by status and the Celery queue's depth.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import redis
from django.conf import settings
from django.db.models import Count
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from sessions_app.models import MaintenanceJob

logger = logging.getLogger("contextproto.metrics")


class StateCollector(Collector):
    """Gauges read at scrape time: maintenance jobs by state, the Celery queue's depth."""

    def collect(self) -> Iterator[GaugeMetricFamily]:
        jobs = GaugeMetricFamily(
            "contextproto_maintenance_jobs", "Maintenance jobs by status.", labels=["status"]
        )
        counts = dict(
            MaintenanceJob.objects.values_list("status").annotate(n=Count("id")).order_by()
        )
        for status in MaintenanceJob.Status.values:
            jobs.add_metric([status], counts.get(status, 0))
        yield jobs
        depth = _queue_depth()
        if depth is not None:
            yield GaugeMetricFamily(
                "contextproto_queue_depth", "Tasks waiting in the Celery queue.", value=depth
            )


def _queue_depth() -> int | None:
    if not settings.REDIS_URL:
        return None
    try:
        client = redis.Redis.from_url(settings.REDIS_URL, socket_timeout=1)
        return int(client.llen(settings.CELERY_TASK_DEFAULT_QUEUE))
    except Exception as exc:  # a scrape reports what it can
        logger.warning("queue depth unavailable: %s", exc)
        return None
