"""Mounts the experiment pages on the session admin (admin autodiscovery imports this after
sessions_app.admin; the URLs are built later, when the URLconf loads)."""

from labs.experiments.admin_pages import ExperimentPages
from sessions_app.admin import add_session_pages

add_session_pages(ExperimentPages)
