"""URL routes: the admin and the JSON API under /api/v1/."""

from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/v1/", include("contextproto.api_urls")),
]
