"""Write docs/contract/reference.md from the code: the catalog, the OpenAPI schema, the error codes.

The reference half of the contract is generated, so it says exactly what the service does:
every protocol version with its options and tool schemas (contextproto.protocol.catalog),
every HTTP operation with its body, answers and shapes (the OpenAPI schema drf-spectacular
serves at /api/v1/schema/), and every error code with its status (contextproto.errors).

    .venv/bin/python scripts/contract_reference.py          # rewrite the file
    .venv/bin/python scripts/contract_reference.py --check  # exit 1 if it is out of date

tests/docs/test_contract.py fails while the file differs from what this renders.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
TARGET = ROOT / "docs" / "contract" / "reference.md"
METHODS = ("get", "post", "patch", "put", "delete")


def openapi_schema() -> dict[str, Any]:
    """The schema /api/v1/schema/ serves, as plain JSON."""
    from drf_spectacular.generators import SchemaGenerator
    from drf_spectacular.renderers import OpenApiJsonRenderer

    schema = SchemaGenerator().get_schema(request=None, public=True)
    return json.loads(OpenApiJsonRenderer().render(schema))


# ---------------------------------------------------------------- JSON Schema as text


# Docstrings and error meanings cite sections of docs/contract.md ("contract §5.2"); the
# generated reference stands on its own, so a table cell leaves them out.
CONTRACT_CITATION = re.compile(r"\s*\(contract §[0-9.a-z]+(?:, §[0-9.a-z]+)*(?::[^)]*)?\)")


def _cell(text: str) -> str:
    """Text for a table cell: one line, pipes escaped, no citations of outside documents."""
    return CONTRACT_CITATION.sub("", " ".join(str(text).split())).replace("|", "\\|")


def _code(value: Any) -> str:
    return "`" + json.dumps(value, ensure_ascii=False) + "`"


def _shape_link(name: str) -> str:
    return f"[{name}](#shape-{name.lower()})"


def _is_null_enum(schema: dict[str, Any], components: dict[str, Any]) -> bool:
    ref = schema.get("$ref")
    target = components[ref.rsplit("/", 1)[1]] if ref else schema
    return target.get("enum") == [None]


def _type_of(schema: dict[str, Any], components: dict[str, Any]) -> str:
    """A short type description: `string (uuid)`, `list of Message`, `"a" | "b"`, …"""
    ref = schema.get("$ref")
    if ref:
        name = ref.rsplit("/", 1)[1]
        target = components[name]
        if "enum" in target:  # an enum component: its values say more than its name
            return " \\| ".join(_code(v) for v in target["enum"])
        return _shape_link(name)
    if "allOf" in schema and len(schema["allOf"]) == 1:
        return _type_of(schema["allOf"][0], components)
    if "oneOf" in schema:  # a nullable enum: the enum, then "or null" from `nullable`
        options = [o for o in schema["oneOf"] if not _is_null_enum(o, components)]
        return " \\| ".join(_type_of(o, components) for o in options)
    if "enum" in schema:
        return " \\| ".join(_code(v) for v in schema["enum"])
    kind = schema.get("type")
    if kind == "array":
        return "list of " + _type_of(schema.get("items", {}), components)
    if kind is None:
        return "any JSON"
    if kind == "object":
        return "object"
    fmt = schema.get("format")
    if fmt in ("uuid", "date-time"):
        return f"{kind} ({fmt})"
    return str(kind)


def _rules(schema: dict[str, Any]) -> list[str]:
    """Bounds and defaults of one value, in words."""
    rules = []
    low, high = schema.get("minimum"), schema.get("maximum")
    if low is not None and high is not None:
        rules.append(f"{low} to {high}")
    elif low is not None:
        rules.append(f"at least {low}")
    elif high is not None:
        rules.append(f"at most {high}")
    short, long = schema.get("minLength"), schema.get("maxLength")
    if short is not None and long is not None:
        rules.append(f"{short} to {long} characters")
    elif long is not None:
        rules.append(f"at most {long} characters")
    elif short is not None:
        rules.append(f"at least {short} characters")
    if "maxItems" in schema:
        rules.append(f"at most {schema['maxItems']} items")
    if "pattern" in schema:
        rules.append(f"matches `{schema['pattern']}`")
    if "default" in schema:
        rules.append(f"default {_code(schema['default'])}")
    return rules


def _field_rows(schema: dict[str, Any], components: dict[str, Any], *, request: bool) -> list[str]:
    required = set(schema.get("required", []))
    rows = ["| field | type | " + ("required" if request else "present") + " | rules, meaning |"]
    rows.append("|---|---|---|---|")
    for name, prop in schema.get("properties", {}).items():
        kind = _type_of(prop, components)
        if prop.get("nullable"):
            kind += ", or null"
        if request:
            presence = "yes" if name in required else "no"
        else:
            presence = "always" if name in required else "when it applies"
        notes = _rules(prop)
        if prop.get("description"):
            notes.append(prop["description"])
        if prop.get("readOnly"):
            notes.append("read-only")
        rows.append(f"| `{name}` | {kind} | {presence} | {_cell('; '.join(notes))} |")
    return rows


# ---------------------------------------------------------------- the catalog


def _catalog_section() -> list[str]:
    from contextproto.protocol import catalog

    versions = catalog.all_versions()
    out = [
        "## Protocol catalog",
        "",
        "What `GET /api/v1/protocols/` answers, as tables. A version's `options` object may hold",
        "exactly these keys; `{}` means every default, and publish stores every key with its",
        "value. The protocol prompt (the text that replaces `{{context_protocol}}`) is in the",
        "same answer (`prompt`) and served as the MCP prompt named `id@version`.",
        "",
        f"Catalog fingerprint: `{catalog.fingerprint()}`.",
        "",
        "| version | status | summary | mutating tools | tools that need `expectedWindowId` |",
        "|---|---|---|---|---|",
    ]
    for version in versions:
        mutating = ", ".join(f"`{t}`" for t in sorted(version.mutating_tools)) or "—"
        guarded = ", ".join(f"`{t}`" for t in sorted(version.expected_window_tools)) or "—"
        out.append(
            f"| `{version.key}` | {version.status} | {_cell(version.summary)} | {mutating} | "
            f"{guarded} |"
        )
    out += ["", "### Options", ""]
    names: list[str] = []
    for version in versions:
        for name in version.option_schema["properties"]:
            if name not in names:
                names.append(name)
    out.append("| option | type | " + " | ".join(f"`{v.key}`" for v in versions) + " |")
    out.append("|---|---|" + "---|" * len(versions))
    for name in names:
        kinds = {
            v.option_schema["properties"][name]["type"]
            for v in versions
            if name in v.option_schema["properties"]
        }
        cells = []
        for version in versions:
            prop = version.option_schema["properties"].get(name)
            if prop is None:
                cells.append("—")
                continue
            text = _code(prop["default"])
            if "minimum" in prop:
                text += f" ({prop['minimum']} to {prop['maximum']})"
            if "enum" in prop:
                text += " (one of " + ", ".join(_code(v) for v in prop["enum"]) + ")"
            cells.append(text)
        out.append(f"| `{name}` | {', '.join(sorted(kinds))} | " + " | ".join(cells) + " |")
    out += ["", "Each cell: the default, then the allowed values. What the options mean:", ""]
    described: dict[str, list[tuple[str, str]]] = {}
    for version in versions:
        for name, prop in version.option_schema["properties"].items():
            entries = described.setdefault(name, [])
            text = prop.get("description", "")
            for position, (keys, seen) in enumerate(entries):
                if seen == text:
                    entries[position] = (f"{keys}, `{version.key}`", seen)
                    break
            else:
                entries.append((f"`{version.key}`", text))
    for name in names:
        for keys, text in described[name]:
            prefix = f"* `{name}`" + (f" ({keys})" if len(described[name]) > 1 else "")
            out.append(f"{prefix}: {_cell(text)}")
    out += ["", "### Protocol tools", ""]
    out += [
        "Every argument schema below is exact: `additionalProperties` is false, so an unknown",
        "argument is refused (`invalid_arguments`). Where versions differ, each schema names",
        "the versions it belongs to.",
        "",
    ]
    order: list[str] = []
    for version in versions:
        for name in version.tools:
            if name not in order:
                order.append(name)
    for name in order:
        holders = [v for v in versions if name in v.tools]
        out.append(f"#### `{name}`")
        out.append("")
        out.append(
            "In "
            + ", ".join(f"`{v.key}`" for v in holders)
            + ("; mutating (fenced by the revision)." if name in catalog.MUTATING_TOOLS else ".")
        )
        out.append("")
        groups: list[tuple[list[str], dict[str, Any]]] = []
        for version in holders:
            tool = version.tools[name]
            for keys, seen in groups:
                if seen == tool:
                    keys.append(version.key)
                    break
            else:
                groups.append(([version.key], tool))
        for keys, tool in groups:
            if len(groups) > 1:
                out.append("Schema of " + ", ".join(f"`{k}`" for k in keys) + ":")
                out.append("")
            out.append(f"> {_cell(tool['description'])}")
            out.append("")
            schema = tool["inputSchema"]
            required = set(schema.get("required", []))
            if not schema.get("properties"):
                out += ["No arguments.", ""]
                continue
            out.append("| argument | type | required | rules, meaning |")
            out.append("|---|---|---|---|")
            for arg, prop in schema["properties"].items():
                notes = _rules(prop)
                if prop.get("description"):
                    notes.append(prop["description"])
                kind = prop.get("type", "any JSON")
                if "enum" in prop:
                    kind = " \\| ".join(_code(v) for v in prop["enum"])
                out.append(
                    f"| `{arg}` | {kind} | {'yes' if arg in required else 'no'} | "
                    f"{_cell('; '.join(notes))} |"
                )
            out.append("")
    return out


# ---------------------------------------------------------------- HTTP


def _body_schema(operation: dict[str, Any]) -> dict[str, Any] | None:
    body = operation.get("requestBody", {}).get("content", {}).get("application/json")
    return body.get("schema") if body else None


def _endpoints_section(schema: dict[str, Any]) -> tuple[list[str], set[str]]:
    components = schema["components"]["schemas"]
    used: set[str] = set()
    out = [
        "## HTTP operations",
        "",
        "Every operation under `/api/v1/` that the OpenAPI schema lists, in its path order.",
        "All take `Authorization: Bearer <key>` except the three health probes; bodies are",
        "JSON objects and unknown fields are refused. Any refusal answers the error shape",
        "([Error](#shape-error)) with the status of its code ([error codes](#error-codes)).",
        "",
    ]
    for path, operations in schema["paths"].items():
        for method in METHODS:
            operation = operations.get(method)
            if operation is None:
                continue
            out.append(f'<a id="op-{operation["operationId"]}"></a>')
            out.append("")
            out.append(f"### `{method.upper()} {path}`")
            out.append("")
            if operation.get("description"):
                out += [_cell(operation["description"]), ""]
            if not any(operation.get("security", [])):
                out += ["No credential.", ""]
            query = [p for p in operation.get("parameters", []) if p["in"] == "query"]
            if query:
                out.append("Query parameters:")
                out.append("")
                for parameter in query:
                    notes = _rules(parameter.get("schema", {}))
                    if parameter.get("description"):
                        notes.append(parameter["description"])
                    out.append(f"* `{parameter['name']}`: {_cell('; '.join(notes))}")
                out.append("")
            body = _body_schema(operation)
            if body is not None:
                name = body["$ref"].rsplit("/", 1)[1]
                out.append("Body:")
                out.append("")
                out += _field_rows(components[name], components, request=True)
                out.append("")
                for prop in components[name].get("properties", {}).values():
                    ref = prop.get("$ref")
                    if ref and "enum" not in components[ref.rsplit("/", 1)[1]]:
                        used.add(ref.rsplit("/", 1)[1])
            elif method in ("post", "patch", "put"):
                out += ["No body.", ""]
            answers = []
            refusals = []
            for status, response in operation["responses"].items():
                if "x-error-codes" in response:
                    codes = ", ".join(f"`{code}`" for code in response["x-error-codes"])
                    refusals.append(f"{status} {codes}")
                    continue
                content = response.get("content", {}).get("application/json")
                if content is None:
                    answers.append(f"{status} (no body)")
                    continue
                name = content["schema"]["$ref"].rsplit("/", 1)[1]
                used.add(name)
                text = f"{status} {_shape_link(name)}"
                for header in response.get("headers", {}):
                    text += f" with header `{header}`"
                answers.append(text)
            out += ["Answers: " + "; ".join(answers) + ".", ""]
            if refusals:
                out += ["Refusals: " + "; ".join(refusals) + ".", ""]
    return out, used


def _shapes_section(schema: dict[str, Any], roots: set[str]) -> list[str]:
    components = schema["components"]["schemas"]
    names: set[str] = set()

    def visit(name: str) -> None:
        if name in names or "enum" in components[name]:
            return
        names.add(name)
        for prop in components[name].get("properties", {}).values():
            # A nullable nested shape is written `allOf: [{$ref}]`, as `_type_of` reads it.
            for node in (prop, prop.get("items", {}), *prop.get("allOf", [])):
                ref = node.get("$ref")
                if ref:
                    visit(ref.rsplit("/", 1)[1])

    for name in sorted(roots | {"Error"}):
        visit(name)
    out = [
        "## Shapes",
        "",
        "The JSON objects the operations answer with (and the objects nested in them).",
        "",
    ]
    for name in sorted(names):
        component = components[name]
        out.append(f'<a id="shape-{name.lower()}"></a>')
        out.append("")
        out.append(f"### {name}")
        out.append("")
        if component.get("description"):
            out += [_cell(component["description"]), ""]
        out += _field_rows(component, components, request=False)
        out.append("")
    return out


def _errors_section() -> list[str]:
    from contextproto.errors import HTTP, RUN, TOOL_RESULT, codes_seen_in

    out = [
        "## Error codes",
        "",
        "Every code an HTTP refusal can carry in `error.code`, with its status (each operation",
        "above lists its own under Refusals).",
        "",
        "| code | status | meaning |",
        "|---|---|---|",
    ]
    for entry in sorted(codes_seen_in(HTTP), key=lambda e: (e.status, e.code)):
        out.append(f"| `{entry.code}` | {entry.status} | {_cell(entry.meaning)} |")
    out += [
        "",
        "### Codes inside a tool result",
        "",
        "A protocol tool's refusal arrives with status 200, in a receipt's `result.error.code`",
        "(over MCP: a tool result with `isError`); no HTTP status applies.",
        "",
        "| code | meaning |",
        "|---|---|",
    ]
    for entry in codes_seen_in(TOOL_RESULT):
        out.append(f"| `{entry.code}` | {_cell(entry.meaning)} |")
    out += [
        "",
        "### Codes of a failed run or maintenance job",
        "",
        "| code | meaning |",
        "|---|---|",
    ]
    for entry in codes_seen_in(RUN):
        out.append(f"| `{entry.code}` | {_cell(entry.meaning)} |")
    out.append("")
    return out


def render() -> str:
    """The whole of docs/contract/reference.md."""
    schema = openapi_schema()
    endpoints, used = _endpoints_section(schema)
    lines = [
        "# Contract reference (generated)",
        "",
        "<!-- Generated by scripts/contract_reference.py from the code; do not edit by hand. -->",
        "",
        "The generated half of [the contract](../contract.md): tables the code itself can",
        "say. Regenerate with `.venv/bin/python scripts/contract_reference.py`; a test fails",
        "while this file is out of date.",
        "",
        "* [Protocol catalog](#protocol-catalog): versions, [options](#options),",
        "  [protocol tools](#protocol-tools)",
        "* [HTTP operations](#http-operations)",
        "* [Shapes](#shapes)",
        "* [Error codes](#error-codes)",
        "",
        *_catalog_section(),
        *endpoints,
        *_shapes_section(schema, used),
        *_errors_section(),
    ]
    return "\n".join(lines).rstrip("\n") + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the file is stale")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "contextproto.settings")
    import django

    django.setup()
    text = render()
    if args.check:
        current = TARGET.read_text() if TARGET.exists() else ""
        if current != text:
            print(f"{TARGET.relative_to(ROOT)} is out of date: run {Path(__file__).name}")
            return 1
        return 0
    TARGET.parent.mkdir(parents=True, exist_ok=True)
    TARGET.write_text(text)
    print(f"wrote {TARGET.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
