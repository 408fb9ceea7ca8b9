"""Static files storage: hashed, compressed names once `collectstatic` wrote the manifest.

WhiteNoise serves the hashed files from STATIC_ROOT with far-future cache headers (and their
gzip twins). Before the first `collectstatic` (a fresh checkout running `manage.py
runserver`) there is no manifest: templates then get the plain names, which WhiteNoise
serves from the apps' static folders (WHITENOISE_USE_FINDERS), so the admin is styled
either way. See docs/decisions.md, "Static files".
"""

from __future__ import annotations

from whitenoise.storage import CompressedManifestStaticFilesStorage


class ManifestStaticFilesStorage(CompressedManifestStaticFilesStorage):
    """WhiteNoise's compressed manifest storage that falls back to plain names without one."""

    def stored_name(self, name: str) -> str:
        # An empty manifest means collectstatic never ran into STATIC_ROOT; refusing every
        # {% static %} (Django's strict default) would turn that into a 500 on every page.
        # With a manifest, a missing entry still fails loudly: collectstatic is stale.
        if not self.hashed_files:
            return name
        return super().stored_name(name)
