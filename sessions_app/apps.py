from django.apps import AppConfig


class SessionsAppConfig(AppConfig):
    name = "sessions_app"
    label = "sessions_app"
    verbose_name = "Sessions"

    def ready(self) -> None:
        # The Celery app, so @shared_task binds to it in every process; the deploy check
        # refusing the public dev SECRET_KEY.
        from contextproto import celery, checks  # noqa: F401
