"""The repository's own contract (docs/contract.md and its generated reference) stays true.

* the reference is exactly what scripts/contract_reference.py renders from the code now;
* every HTTP operation the service routes is in the contract, and the contract names none
  that the service lacks (apart from the operations it says are still being added);
* every error code or field name the contract spells in snake_case exists in the code;
* no Markdown link of the repository leads outside it, and every link and anchor resolves.
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
from pathlib import Path

import pytest
from django.urls import resolve

from contextproto.errors import ERRORS

ROOT = Path(__file__).resolve().parents[2]
CONTRACT = ROOT / "docs" / "contract.md"
REFERENCE = ROOT / "docs" / "contract" / "reference.md"
SOURCES = ("contextproto", "agents", "sessions_app")


def load_generator():
    spec = importlib.util.spec_from_file_location(
        "contract_reference", ROOT / "scripts" / "contract_reference.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_reference_is_what_the_code_says_now():
    rendered = load_generator().render()
    assert REFERENCE.read_text() == rendered, (
        "docs/contract/reference.md is out of date: run "
        ".venv/bin/python scripts/contract_reference.py and commit the result"
    )


def _normalized(path: str) -> str:
    path = path.split("?", 1)[0].removeprefix("/api/v1/")
    return re.sub(r"\{[^}]*\}", "{}", path)


def routed_operations() -> set[tuple[str, str]]:
    """Every operation of the OpenAPI schema, and the schema itself (which it does not list)."""
    assert resolve("/api/v1/schema/").url_name == "api-schema"
    schema = load_generator().openapi_schema()
    return {("GET", "schema/")} | {
        (method.upper(), _normalized(path))
        for path, operations in schema["paths"].items()
        for method in operations
        if method in ("get", "post", "patch", "put", "delete")
    }


def contract_operations() -> set[tuple[str, str]]:
    found = re.findall(r"`(GET|POST|PATCH|PUT|DELETE) ([a-z{][^`\s]*)`", CONTRACT.read_text())
    return {(method, _normalized(path)) for method, path in found}


def test_every_routed_operation_is_in_the_contract():
    missing = routed_operations() - contract_operations()
    assert not missing, f"operations the contract does not describe: {sorted(missing)}"


def test_the_contract_describes_no_operation_the_service_lacks():
    unknown = contract_operations() - routed_operations()
    assert not unknown, f"operations in the contract that the service does not route: {unknown}"


def code_strings() -> set[str]:
    """Every quoted snake_case string of the service's Python sources."""
    found: set[str] = set()
    literal = re.compile(r"""["']([a-z][a-z0-9]*(?:_[a-z0-9]+)+)["']""")
    for package in SOURCES:
        for source in (ROOT / package).rglob("*.py"):
            found.update(literal.findall(source.read_text()))
    return found


def test_every_code_and_field_the_contract_spells_exists_in_the_code():
    """A misspelt error code (or one that was renamed) fails here, not in a host's parser."""
    spelled = set(re.findall(r"`([a-z][a-z0-9]*(?:_[a-z0-9]+)+)`", CONTRACT.read_text()))
    schema = load_generator().openapi_schema()
    path_parameters = {name for path in schema["paths"] for name in re.findall(r"\{(\w+)\}", path)}
    known = code_strings() | set(ERRORS) | path_parameters
    assert spelled - known == set()
    # Every registered code is in the reference: an HTTP refusal's with its status, a code
    # seen only in tool results or failed runs in the tables without one (contract §12).
    reference = REFERENCE.read_text()
    for code, entry in ERRORS.items():
        row = f"| `{code}` | {entry.status} |" if "http" in entry.seen_in else f"| `{code}` | "
        assert row in reference, code


def github_anchors(markdown: str) -> set[str]:
    """The anchors GitHub gives a file's headings, plus its explicit `<a id="…">` anchors."""
    anchors = set(re.findall(r'<a id="([^"]+)"></a>', markdown))
    seen: dict[str, int] = {}
    in_code = False
    for line in markdown.splitlines():
        if line.startswith("```"):
            in_code = not in_code
        if in_code or not line.startswith("#"):
            continue
        text = line.lstrip("#").strip()
        slug = re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        anchors.add(slug if count == 0 else f"{slug}-{count}")
    return anchors


def markdown_files() -> list[Path]:
    """The repository's Markdown files (git's view; a plain walk outside a checkout)."""
    try:
        listed = subprocess.run(
            ["git", "ls-files", "--cached", "--others", "--exclude-standard", "*.md"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
    except (OSError, subprocess.CalledProcessError):
        skipped = {".venv", "var", "artifacts", "node_modules", ".git"}
        return sorted(
            path
            for path in ROOT.rglob("*.md")
            if not skipped.intersection(path.relative_to(ROOT).parts)
        )
    return [ROOT / name for name in listed if (ROOT / name).exists()]


LINK = re.compile(r"\]\(([^)\s]+)\)")


@pytest.mark.parametrize("document", markdown_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_links_stay_in_the_repository_and_resolve(document: Path):
    text = document.read_text()
    for target in LINK.findall(text):
        if re.match(r"^[a-z]+:", target):  # https:, mailto:
            continue
        assert "../shared" not in target and not target.endswith("SPEC.md"), (document, target)
        path, _, anchor = target.partition("#")
        resolved = (document.parent / path).resolve() if path else document
        assert resolved.is_relative_to(ROOT), f"{document.name} links outside: {target}"
        assert resolved.exists(), f"{document.name} links to a missing file: {target}"
        if anchor and resolved.suffix == ".md":
            assert anchor in github_anchors(resolved.read_text()), (
                f"{document.name}: no anchor #{anchor} in {resolved.name}"
            )


def test_the_readme_points_at_the_contract_in_the_repository():
    readme = (ROOT / "README.md").read_text()
    assert "](docs/contract.md)" in readme
    assert "SPEC.md" not in readme and "../shared" not in readme
