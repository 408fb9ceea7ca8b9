from django.apps import AppConfig


class SessionsAppConfig(AppConfig):
    name = "sessions_app"
    label = "sessions_app"
    verbose_name = "Sessions"

    def ready(self) -> None:
        # The Celery app, so @shared_task binds to it in every process; the deploy check
        # refusing the public dev SECRET_KEY; the node registry's signal handlers (contract §3).
        from contextproto import celery, checks  # noqa: F401
        from sessions_app import nodes  # noqa: F401

        install_service_hooks()
        install_scrape_collectors()


def install_service_hooks() -> None:
    """Give the lower service layers their calls into the layers above (store/hooks.py).

    The one place that knows both ends: the services import only downwards, and the tasks
    and orchestrators are wired in here once the models are loaded.
    """
    from sessions_app import maintenance, tasks
    from sessions_app.services import rebuild, runtime
    from sessions_app.store import hooks, snapshot_bodies

    hooks.run_advance_enqueue.install(tasks.run_advance_enqueue)
    hooks.maintenance_job_enqueue.install(tasks.maintenance_job_enqueue)
    hooks.host_tool_result_written.install(runtime.run_resume_if_ready)
    hooks.maintenance_request.install(maintenance.maintenance_request)
    hooks.snapshot_view.install(snapshot_bodies.view_of)
    hooks.snapshot_rebuild.install(rebuild.snapshot_rebuild)


def install_scrape_collectors() -> None:
    """Let /metrics read the sessions' gauges without the project package importing the app."""
    from contextproto.metrics import register_scrape_collector
    from sessions_app.metrics import StateCollector

    register_scrape_collector(StateCollector)
