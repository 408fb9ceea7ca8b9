"""The sessions' HTTP API: thin views over the services and reads. `views` (sessions,
messages, projection, windows, folds, snapshots, KV, forks), `tool_calls` (dispatch and
abandon), `maintenance` (a window's maintenance jobs), `health` (the probes), `keys`, `usage`
and `turns`; the request/response serializers are in `shapes`. Routes are in
sessions_app/urls.py (the probes in contextproto/api_urls.py)."""
