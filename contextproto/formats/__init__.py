"""Date formats of the operator pages (settings.FORMAT_MODULE_PATH), per language."""
