"""Routes of the JSON API (contract §12)."""

from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView

from sessions_app.api import health

# The schema's description ends with the error codes: a postprocessing hook in
# SPECTACULAR_SETTINGS (contextproto.api_schema.error_codes_hook), so the CLI output has them too.
urlpatterns = [
    path("schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("health/", health.HealthApi.as_view(), name="api-health"),
    path("health/live/", health.HealthLiveApi.as_view(), name="api-health-live"),
    path("health/ready/", health.HealthReadyApi.as_view(), name="api-health-ready"),
    path("", include("agents.urls")),
    path("", include("sessions_app.urls")),
]
