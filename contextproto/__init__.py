"""contextproto: the Django project package; `contextproto.protocol` is the Django-free engine.

The Celery app is loaded by `sessions_app.apps` rather than here, so importing the engine
never drags in Celery or Django.
"""
