"""docs/architecture.md places every module (issue 35): its index lists each module of the
product and labs under the layer the layer test gives it, and every bench and script file."""

from __future__ import annotations

import importlib.util

from tests.test_service_layers import LAYERS, ROOT

spec = importlib.util.spec_from_file_location(
    "architecture_index", ROOT / "scripts" / "architecture_index.py"
)
assert spec and spec.loader
index = importlib.util.module_from_spec(spec)
spec.loader.exec_module(index)


def test_every_module_is_listed_under_its_layer():
    page = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    listed, placed = index.listed_modules(page), index.placed_modules()
    for heading, modules in placed.items():
        got = listed.get(heading)
        assert got is not None, f"docs/architecture.md has no index heading {heading!r}"
        missing, extra = sorted(set(modules) - set(got)), sorted(set(got) - set(modules))
        assert not missing and not extra, (
            f"{heading}: missing {missing}, listed but not of this layer {extra}; "
            "run .venv/bin/python scripts/architecture_index.py"
        )
    assert set(listed) == set(placed)


def test_the_index_knows_every_layer_and_tool_folder():
    placed = index.placed_modules()
    assert list(placed)[: len(LAYERS)] == [what for what, _ in reversed(LAYERS)]
    assert "contextproto.protocol.view" in placed[LAYERS[0][0]]
    assert "bench/run.py" in placed[index.TOOLS_HEADING]
    assert "scripts/architecture_index.py" in placed[index.TOOLS_HEADING]


def test_a_missing_module_is_found():
    page = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    without = page.replace("* `contextproto.protocol.view`", "* `contextproto.protocol.gone`")
    assert index.listed_modules(without) != index.placed_modules()
