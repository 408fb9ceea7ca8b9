"""The README's screenshots (scripts/screenshots.py writes them): every image the README shows
is in docs/screenshots/, and nothing stale lies there that the README no longer shows."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SHOTS = ROOT / "docs" / "screenshots"
IMAGE = re.compile(r"!\[[^\]]*\]\((docs/screenshots/[^)\s]+)\)")


def readme_images() -> list[str]:
    return IMAGE.findall((ROOT / "README.md").read_text())


def test_every_screenshot_the_readme_shows_exists_as_a_png():
    shown = readme_images()
    assert shown, "README.md shows no screenshot from docs/screenshots/"
    missing = [p for p in shown if not (ROOT / p).is_file()]
    assert missing == []
    for path in shown:
        assert (ROOT / path).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"


def test_docs_screenshots_holds_only_what_the_readme_shows():
    shown = {Path(p).name for p in readme_images()}
    stored = {p.name for p in SHOTS.iterdir()}
    assert stored - shown == set(), "screenshots the README no longer shows"


def test_the_script_takes_every_screenshot_the_readme_shows():
    # A screenshot the script does not take would go stale at the next remake.
    script = (ROOT / "scripts" / "screenshots.py").read_text()
    taken = set(re.findall(r'save\("([a-z-]+)"\)', script))
    assert {Path(p).stem for p in readme_images()} == taken
