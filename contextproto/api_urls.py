"""Routes of the JSON API (SPEC §9)."""

from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView

from sessions_app import apis as session_apis

urlpatterns = [
    path("schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("health/", session_apis.HealthApi.as_view(), name="api-health"),
    path("health/live/", session_apis.HealthLiveApi.as_view(), name="api-health-live"),
    path("health/ready/", session_apis.HealthReadyApi.as_view(), name="api-health-ready"),
    path("", include("agents.urls")),
    path("", include("sessions_app.urls")),
]
