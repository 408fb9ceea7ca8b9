"""URL routes: the landing page, the admin and the JSON API under /api/v1/."""

from django.contrib import admin
from django.urls import include, path

from contextproto.landing import landing
from contextproto.metrics import metrics_view

urlpatterns = [
    # What this service is, with links to its parts; the admin's "View site" leads here.
    path("", landing, name="landing"),
    path("admin/", admin.site.urls),
    path("api/v1/", include("contextproto.api_urls")),
    # OpenAI- and Anthropic-compatible endpoints: an agent changes its base URL (contract §14).
    path("gateway/", include("sessions_app.gateway.urls")),
    path("metrics", metrics_view, name="metrics"),
]

# Under /api/ an unrouted path, a refusal outside a view or a crash answers the JSON error
# shape (contract §12).
handler400 = "contextproto.middleware.api_bad_request"
handler404 = "contextproto.middleware.api_not_found"
handler500 = "contextproto.middleware.api_server_error"
