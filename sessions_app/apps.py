from django.apps import AppConfig


class SessionsAppConfig(AppConfig):
    name = "sessions_app"
    label = "sessions_app"
    verbose_name = "Sessions"

    def ready(self) -> None:
        # The Celery app, so @shared_task binds to it in every process; the deploy check
        # refusing the public dev SECRET_KEY; the node registry's signal handlers (SPEC §12).
        from contextproto import celery, checks, nodes  # noqa: F401
