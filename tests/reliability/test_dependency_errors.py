"""A lost dependency is a 503 `dependency_unavailable` in the one error shape, never a 500."""

from __future__ import annotations

from kombu.exceptions import OperationalError as BrokerUnavailable
from redis.exceptions import ConnectionError as RedisConnectionError

from sessions_app.api import views as apis


def test_a_redis_failure_in_a_request_is_a_503_not_a_500(api_session, monkeypatch):
    """Cache and broker errors reach the one error handler as dependency_unavailable."""
    s = api_session()
    for error in (RedisConnectionError("Connection refused"), BrokerUnavailable("refused")):

        def fail(*args, error=error, **kwargs):
            raise error

        monkeypatch.setattr(apis.projection, "projection_build", fail)
        response = s.client.post(s.path("projection/"), {})
        assert response.status_code == 503, response.content
        body = response.json()["error"]
        assert body["code"] == "dependency_unavailable"
        assert body["details"] == {"dependency": "redis"}
