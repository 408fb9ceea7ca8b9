"""Each pytest-xdist worker gets a Redis database of its own.

Loaded with `-p tests.worker_redis` (pyproject addopts), so it runs before Django reads its
settings. Worker gwN of a run with REDIS_URL=redis://…/D uses database D+N: the Celery
queues, the cache, node records and metrics of one worker never meet another's (a purge in
one worker's end-to-end test would otherwise eat the other's tasks). PostgreSQL needs
nothing here: pytest-django gives each worker its own test database (suffix _gwN).
"""

from __future__ import annotations

import os
import re

_DB = re.compile(r"^(?P<base>redis://[^/]*)(?:/(?P<db>\d+))?(?P<rest>\?.*)?$")
REDIS_DATABASES = 16  # Redis's default `databases`


def worker_redis_url(url: str, worker: str) -> str:
    """`url` moved to database base+N for xdist worker `gwN`."""
    match = _DB.match(url)
    if not match:
        raise ValueError(f"REDIS_URL {url!r}: expected redis://host:port[/db]")
    db = int(match["db"] or 0) + int(worker.removeprefix("gw"))
    if db >= REDIS_DATABASES:
        raise ValueError(
            f"REDIS_URL {url!r} with worker {worker} needs database {db}; Redis has "
            f"{REDIS_DATABASES}: give the run a lower database number"
        )
    return f"{match['base']}/{db}{match['rest'] or ''}"


_worker = os.environ.get("PYTEST_XDIST_WORKER", "")
if _worker and os.environ.get("REDIS_URL"):
    os.environ["REDIS_URL"] = worker_redis_url(os.environ["REDIS_URL"], _worker)
