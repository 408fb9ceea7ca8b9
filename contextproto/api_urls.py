"""Routes of the JSON API (SPEC §9)."""

from django.conf import settings
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView

from contextproto.api_schema import api_description
from sessions_app import apis as session_apis

# The schema's description ends with the error codes (contextproto.api_schema.error_codes).
SCHEMA_SETTINGS = {"DESCRIPTION": api_description(settings.SPECTACULAR_SETTINGS["DESCRIPTION"])}

urlpatterns = [
    path("schema/", SpectacularAPIView.as_view(custom_settings=SCHEMA_SETTINGS), name="api-schema"),
    path("health/", session_apis.HealthApi.as_view(), name="api-health"),
    path("health/live/", session_apis.HealthLiveApi.as_view(), name="api-health-live"),
    path("health/ready/", session_apis.HealthReadyApi.as_view(), name="api-health-ready"),
    path("", include("agents.urls")),
    path("", include("sessions_app.urls")),
]
