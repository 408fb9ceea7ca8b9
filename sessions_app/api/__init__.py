"""The sessions' HTTP API: thin views (`views`, `keys`, `usage`) over the services and reads,
and the request/response serializers (`shapes`). Routes are in sessions_app/urls.py."""
