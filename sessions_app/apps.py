from django.apps import AppConfig


class SessionsAppConfig(AppConfig):
    name = "sessions_app"
    label = "sessions_app"
    verbose_name = "Sessions"

    def ready(self) -> None:
        # Load the Celery app so @shared_task binds to it in every process.
        from contextproto import celery  # noqa: F401
