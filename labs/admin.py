"""Mounts the experiment pages on the session admin and links them from the dashboard (admin
autodiscovery imports this after sessions_app.admin; the URLs are built later, when the
URLconf loads)."""

from labs.experiments.admin_pages import ExperimentPages
from sessions_app.admin import add_session_pages
from sessions_app.console import add_console_link

add_session_pages(ExperimentPages)
add_console_link("Experiments", "admin:sessions_app_experiments", after="Protocol catalog")
