"""Per-Application and per-session rate limits: 429 with Retry-After in the one error shape."""

from __future__ import annotations

import pytest
from django.core.cache import cache
from django.core.exceptions import ImproperlyConfigured

from contextproto.settings import env_rate


@pytest.fixture
def limits(settings):
    cache.clear()

    def apply(application: str | None = None, session: str | None = None) -> None:
        settings.API_THROTTLE_RATES = {"application": application, "session": session}

    yield apply
    cache.clear()


def test_a_session_key_over_its_rate_gets_429_with_retry_after(api_session, limits):
    s = api_session()
    limits(session="3/m")
    statuses = [s.client.get(s.path()).status_code for _ in range(4)]
    assert statuses == [200, 200, 200, 429]
    refused = s.client.get(s.path())
    assert refused.status_code == 429
    assert 1 <= int(refused["Retry-After"]) <= 60
    body = refused.json()
    assert body["error"]["code"] == "rate_limited"
    assert body["error"]["details"]["retryAfterSeconds"] == int(refused["Retry-After"])
    # Another session of the same Application has its own budget.
    other = api_session(version=3)
    assert other.client.get(other.path()).status_code == 200


def test_the_application_rate_counts_every_key_of_the_application(api_session, limits):
    s = api_session()
    limits(application="4/m")
    assert s.app_client.get("protocols/").status_code == 200
    assert s.app_client.get("protocols/").status_code == 200
    assert s.client.get(s.path()).status_code == 200  # the session key counts too
    assert s.client.get(s.path()).status_code == 200
    assert s.app_client.get("protocols/").status_code == 429


def test_a_cache_outage_lets_requests_through(api_session, limits, monkeypatch):
    s = api_session()
    limits(session="1/m")

    def down(*_args, **_kwargs):
        raise ConnectionError("cache unreachable")

    monkeypatch.setattr(
        "contextproto.throttles.SimpleRateThrottle.cache",
        type("Down", (), {"get": staticmethod(down), "set": staticmethod(down)})(),
    )
    assert [s.client.get(s.path()).status_code for _ in range(3)] == [200, 200, 200]


def test_rates_are_validated_when_settings_load(monkeypatch):
    monkeypatch.setenv("THROTTLE_SESSION_RATE", "fast")
    with pytest.raises(ImproperlyConfigured):
        env_rate("THROTTLE_SESSION_RATE", "50/s")
    monkeypatch.setenv("THROTTLE_SESSION_RATE", "off")
    assert env_rate("THROTTLE_SESSION_RATE", "50/s") is None
