"""The host-tool scenario of tests/api/test_host_tools_runtime.py, on a real Celery worker.

Everything goes through the API in this process; the worker advances the runs from Redis on
the same PostgreSQL database, as `make serve` + `make worker` do.
"""

from __future__ import annotations

import pytest

from tests.api.test_host_tools_runtime import host_tool_scenario
from tests.servers import purged_celery_queue, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


@pytest.mark.django_db(transaction=True)
def test_a_host_tool_registered_through_the_api_runs_on_a_real_worker(e2e_worker, tenant):
    e2e_worker.require()
    _, app = tenant("Weather e2e")

    def wait(predicate, what: str):
        try:
            return wait_for(predicate, 60, what, every=0.2)
        except AssertionError:
            e2e_worker.require()  # a dead worker says so, with its log
            raise

    with purged_celery_queue():
        host_tool_scenario(app, wait)
