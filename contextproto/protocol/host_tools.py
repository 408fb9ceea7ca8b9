"""Host tools (contract §11, §12): their name rule, reserved names, input schemas and argument
checks.

A host tool's `inputSchema` is any JSON Schema 2020-12 object schema, as frameworks generate
them (pydantic's `anyOf` for `Optional[...]`, `$defs` and `$ref` for nested models, `format`),
checked and applied by the `jsonschema` library. Registration refuses what the library could
not apply in full: a schema the 2020-12 metaschema refuses, a root that is not an object schema
(tool arguments are a JSON object), another dialect's `$schema`, and a `$ref` that leaves the
document, points at nothing, or loops back to the same value. Nothing is ever fetched: every
reference must resolve inside the schema, and the library's registry refuses to retrieve any
other.

`arguments_problem` validates a call's arguments against all of the schema, with the formats
of CHECKED_FORMATS checked (other formats are annotations); the built-in runtime refuses a
model's call whose arguments fail it, so the host only ever receives arguments its schema
allows. Compiled validators are cached by the schema's canonical JSON: the runtime checks a
call on every turn.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date
from typing import TYPE_CHECKING, Any

from jsonschema import (
    Draft4Validator,
    Draft6Validator,
    Draft7Validator,
    Draft201909Validator,
    Draft202012Validator,
    FormatChecker,
)
from jsonschema.protocols import Validator
from referencing import Registry, Resource, Specification
from referencing.exceptions import NoSuchResource, Unresolvable
from referencing.jsonschema import DRAFT202012, specification_with

from .catalog import all_versions
from .jsonschema_check import json_type_name
from .schema_messages import SchemaProblem, child_path, first_problem, short
from .vocabulary import JSON_SCHEMA_DIALECT

if TYPE_CHECKING:  # the package exports the class only through its private module
    from referencing._core import Resolver

__all__ = [
    "CHECKED_FORMATS",
    "NAME_RULE",
    "SchemaProblem",
    "arguments_problem",
    "child_path",
    "input_schema_problem",
    "name_problem",
    "reserved_names",
]

# What providers accept as a function name (OpenAI and Anthropic alike).
NAME_RE = re.compile(r"[a-zA-Z0-9_-]{1,64}")
NAME_RULE = "1-64 characters: letters a-z and A-Z, digits, '_' and '-'"

# Formats whose values are checked; any other format is an annotation, as 2020-12 allows.
# The library's own checkers need no optional package for these; date-time and uri (what
# pydantic emits for datetime and AnyUrl) are ours, since the library's need packages we do
# not install. Named here, so the set never changes with what happens to be installed.
LIBRARY_FORMATS = ("date", "email", "idn-email", "ipv4", "ipv6", "regex", "uuid")
CHECKED_FORMATS = tuple(sorted((*LIBRARY_FORMATS, "date-time", "uri")))

# The 2020-12 keywords whose values are schemas (referencing's table for the draft).
ONE_SCHEMA_KEYWORDS = (
    "additionalProperties",
    "contains",
    "contentSchema",
    "else",
    "if",
    "items",
    "not",
    "propertyNames",
    "then",
    "unevaluatedItems",
    "unevaluatedProperties",
)
SCHEMA_LIST_KEYWORDS = ("allOf", "anyOf", "oneOf", "prefixItems")
SCHEMA_MAP_KEYWORDS = (
    "$defs",
    "definitions",
    "dependentSchemas",
    "patternProperties",
    "properties",
)
REFERENCE_KEYWORDS = ("$dynamicRef", "$ref")
DIALECTS = frozenset({JSON_SCHEMA_DIALECT, JSON_SCHEMA_DIALECT + "#"})
# Older drafts a generator may declare at the root (zod-to-json-schema, which the Vercel AI SDK
# uses, writes draft-07): such a schema is checked and applied under its own draft's rules,
# so a gateway client's tools are taken as its framework wrote them (contract §14).
OLDER_DRAFTS: dict[str, type[Validator]] = {
    uri + end: validator
    for uri, validator in (
        ("http://json-schema.org/draft-07/schema", Draft7Validator),
        ("http://json-schema.org/draft-06/schema", Draft6Validator),
        ("http://json-schema.org/draft-04/schema", Draft4Validator),
        ("https://json-schema.org/draft/2019-09/schema", Draft201909Validator),
    )
    for end in ("", "#")
}
VALIDATOR_CACHE_SIZE = 256
_TOO_DEEP = "is nested too deeply to check; send it with less nesting."


def reserved_names() -> frozenset[str]:
    """Every tool name of every catalog version: host tools may not take them.

    Computed from the catalog, so a tool a new catalog version adds is reserved with it.
    """
    return frozenset(name for version in all_versions() for name in version.tools)


def name_problem(name: object) -> str | None:
    """Why `name` breaks the naming rule of host tools, or None (reservations: reserved_names)."""
    if not isinstance(name, str) or NAME_RE.fullmatch(name) is None:
        return f"name must be {NAME_RULE} (got {short(name)})."
    return None


# ---------------------------------------------------------------- formats

_DATE_TIME = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.\d+)?(?:[Zz]|[+-](\d{2}):(\d{2}))",
    re.ASCII,
)
# RFC 3986 absolute URI, syntax only: a scheme, then URI characters or %-escapes.
_URI = re.compile(
    r"[A-Za-z][A-Za-z0-9+.\-]*:(?:[A-Za-z0-9\-._~:/?#\[\]@!$&'()*+,;=]|%[0-9A-Fa-f]{2})*"
)


def _is_date_time(value: object) -> bool:
    """RFC 3339 `date-time` (a time zone is required; second 60 for leap seconds)."""
    if not isinstance(value, str):
        return True
    found = _DATE_TIME.fullmatch(value)
    if found is None:
        return False
    year, month, day, hour, minute, second = (int(found.group(n)) for n in range(1, 7))
    try:
        date(year, month, day)
    except ValueError:
        return False
    offset_ok = found.group(7) is None or (int(found.group(7)) <= 23 and int(found.group(8)) <= 59)
    return hour <= 23 and minute <= 59 and second <= 60 and offset_ok


def _is_uri(value: object) -> bool:
    return not isinstance(value, str) or _URI.fullmatch(value) is not None


def _format_checker() -> FormatChecker:
    library = Draft202012Validator.FORMAT_CHECKER.checkers
    checker = FormatChecker(formats=())
    for name in LIBRARY_FORMATS:
        check, raises = library[name]  # a KeyError here: the pinned library changed
        checker.checks(name, raises)(check)
    checker.checks("date-time")(_is_date_time)
    checker.checks("uri")(_is_uri)
    return checker


# ---------------------------------------------------------------- the library, never fetching


def _refuse_retrieval(uri: str) -> Resource[Any]:
    # Called for any URI not in the schema itself: refused, so nothing is ever fetched.
    raise NoSuchResource(ref=uri)  # type: ignore[call-arg]  # attrs class: mypy sees no field


# `retrieve` is an attrs alias, which mypy does not see.
NO_FETCH: Registry[Any] = Registry(retrieve=_refuse_retrieval)  # type: ignore[call-arg]
FORMATS = _format_checker()
# The metaschema is bundled with the library (jsonschema-specifications); only the regex
# format matters to it (`pattern`, `patternProperties`), and it is checked.
_METASCHEMA = Draft202012Validator(
    Draft202012Validator.META_SCHEMA,
    registry=NO_FETCH,
    format_checker=FormatChecker(formats=("regex",)),
)


@functools.cache
def _metaschema_of(validator: type[Validator]) -> Validator:
    if validator is Draft202012Validator:
        return _METASCHEMA
    return validator(
        validator.META_SCHEMA, registry=NO_FETCH, format_checker=FormatChecker(formats=("regex",))
    )


def _draft_of(schema: object) -> tuple[type[Validator], str]:
    """The validator class and dialect URI a schema's root `$schema` asks for (2020-12 unless
    it names one of OLDER_DRAFTS)."""
    dialect = schema.get("$schema") if isinstance(schema, dict) else None
    if isinstance(dialect, str) and dialect in OLDER_DRAFTS:
        return OLDER_DRAFTS[dialect], dialect
    return Draft202012Validator, JSON_SCHEMA_DIALECT


# ---------------------------------------------------------------- the schema itself


def input_schema_problem(schema: object) -> SchemaProblem | None:
    """The first reason `schema` is not a host tool input schema, or None.

    In order: a JSON object; an object schema at the root (`"type": "object"` or
    `["object"]`); valid against the 2020-12 metaschema; `$schema`, where given, names
    2020-12; every `$ref` local (`#...`) and pointing at a schema of this document.
    """
    if not isinstance(schema, dict):
        return SchemaProblem("$", f"must be a JSON object (got {json_type_name(schema)}).")
    root_type = schema.get("type")
    if root_type != "object" and root_type != ["object"]:
        got = short(root_type) if "type" in schema else "no type"
        hint = (
            " A root $ref (a recursive model) must be inlined: put the referenced object "
            "schema at the root and keep $defs."
            if "$ref" in schema
            else ""
        )
        return SchemaProblem(
            "$.type",
            'the root schema must say "type": "object" (tool arguments are a JSON object); '
            f"got {got}.{hint}",
        )
    compiled = _compiled_or_problem(schema)
    return compiled if isinstance(compiled, SchemaProblem) else None


def _compiled_or_problem(schema: object) -> Validator | SchemaProblem:
    try:
        canonical = json.dumps(
            schema, sort_keys=True, ensure_ascii=False, allow_nan=False, separators=(",", ":")
        )
    except (TypeError, ValueError) as exc:
        return SchemaProblem("$", f"must be JSON ({exc}).")
    return _compiled(canonical)


@functools.lru_cache(maxsize=VALIDATOR_CACHE_SIZE)
def _compiled(canonical: str) -> Validator | SchemaProblem:
    """The validator of the schema written as `canonical` (sorted keys), or why there is none.

    Keyed by canonical JSON so a schema read back with its keys reordered (PostgreSQL's
    jsonb does) shares the entry, and built from it so the answers do not depend on key
    order. Both outcomes are cached: a schema is checked once per process.
    """
    schema = json.loads(canonical)
    validator, dialect = _draft_of(schema)
    try:
        problem = first_problem(_metaschema_of(validator).iter_errors(schema), in_schema=True)
        if problem is None:
            problem = _reference_problem(schema, dialect)
    except RecursionError:  # the library recurses once per level of nesting
        problem = SchemaProblem("$", _TOO_DEEP)
    if problem is not None:
        return problem
    return validator(schema, registry=NO_FETCH, format_checker=FORMATS)


def _subschemas(schema: dict[str, Any], path: str) -> Iterator[tuple[object, str]]:
    """The schemas directly inside `schema`, with their paths (keyword order is sorted)."""
    for keyword, value in schema.items():
        here = child_path(path, keyword)
        if keyword in ONE_SCHEMA_KEYWORDS:
            yield value, here
        elif keyword in SCHEMA_LIST_KEYWORDS and isinstance(value, list):
            yield from ((item, child_path(here, n)) for n, item in enumerate(value))
        elif keyword in SCHEMA_MAP_KEYWORDS and isinstance(value, dict):
            yield from ((item, child_path(here, name)) for name, item in value.items())


@dataclass(frozen=True)
class _Reference:
    path: str  # of the keyword: $.properties.a["$ref"]
    value: str
    source: int  # id() of the schema that holds it
    resolver: Resolver[Any]  # at the schema's base URI ($id)


def _reference_problem(schema: object, dialect: str = JSON_SCHEMA_DIALECT) -> SchemaProblem | None:
    """The first `$schema` or `$ref` of `schema` the library could not apply offline, or None.

    `dialect` is the root's (2020-12, or an older draft it declares); a subschema may name no
    other.

    Walks every schema of the document (metaschema-valid by now) with a resolver that
    follows `$id`, so each local reference is resolved as the library will resolve it, and
    refuses references that loop back to the same value (the library would recurse forever).
    """
    schemas: set[int] = set()
    in_place: dict[int, list[int]] = {}  # schema -> the schemas applied to the same value
    references: list[_Reference] = []
    specification: Specification[Any] = specification_with(dialect, default=DRAFT202012)
    allowed = DIALECTS | {dialect}
    root = NO_FETCH.resolver_with_root(specification.create_resource(schema))
    stack: list[tuple[object, str, Resolver[Any]]] = [(schema, "$", root)]
    while stack:
        node, path, resolver = stack.pop()
        schemas.add(id(node))
        if not isinstance(node, dict):
            continue  # true or false
        resolver = resolver.in_subresource(specification.create_resource(node))
        named = node.get("$schema", dialect)
        if named not in allowed:
            return SchemaProblem(
                child_path(path, "$schema"),
                f"names another dialect ({short(named)}); inputSchema is read as JSON "
                f'Schema 2020-12 (or the draft its root declares): remove "$schema" or set it '
                f'to "{JSON_SCHEMA_DIALECT}".',
            )
        in_place[id(node)] = [id(s) for s in _in_place_subschemas(node)]
        for keyword in REFERENCE_KEYWORDS:
            if keyword in node:
                references.append(
                    _Reference(child_path(path, keyword), node[keyword], id(node), resolver)
                )
        # Reversed, so the walk visits subschemas in the schema's (sorted) order.
        stack.extend((s, p, resolver) for s, p in reversed(list(_subschemas(node, path))))
    references.sort(key=lambda r: r.path)
    targets: dict[str, int] = {}
    for reference in references:
        target = _resolved(reference, schemas)
        if isinstance(target, SchemaProblem):
            return target
        if not isinstance(target, bool):
            in_place[reference.source].append(id(target))
            targets[reference.path] = id(target)
    looping = _cycle(in_place)
    for reference in references:
        if reference.source in looping and targets.get(reference.path) in looping:
            return SchemaProblem(
                reference.path,
                f"{short(reference.value)} leads back to this schema without going into a "
                "property or an item, so checking a value would never end; break the loop.",
            )
    return None


def _in_place_subschemas(schema: dict[str, Any]) -> Iterator[object]:
    """The subschemas the library applies to the value `schema` itself is applied to."""
    for keyword in ("allOf", "anyOf", "oneOf"):
        yield from schema.get(keyword, [])
    for keyword in ("not", "if", "then", "else"):
        if keyword in schema:
            yield schema[keyword]
    yield from schema.get("dependentSchemas", {}).values()


def _cycle(edges: dict[int, list[int]]) -> set[int]:
    """The nodes of one cycle of `edges` (the first a depth-first walk meets), or none."""
    state: dict[int, int] = {}  # 1: on the current path, 2: done
    for start in edges:
        if start in state:
            continue
        path = [start]
        pending = [iter(edges.get(start, ()))]
        state[start] = 1
        while pending:
            step = next(pending[-1], None)
            if step is None:
                state[path.pop()] = 2
                pending.pop()
            elif state.get(step) == 1:
                return set(path[path.index(step) :])
            elif step not in state:
                state[step] = 1
                path.append(step)
                pending.append(iter(edges.get(step, ())))
    return set()


def _resolved(reference: _Reference, schemas: set[int]) -> object:
    """The schema `reference` points to, or why the library could not apply it."""
    if not reference.value.startswith("#"):
        return SchemaProblem(
            reference.path,
            f"{short(reference.value)} refers outside this schema, which is never fetched; put "
            'the referenced schema under "$defs" and refer to it as "#/$defs/<Name>".',
        )
    try:
        target: object = reference.resolver.lookup(reference.value).contents
    except Unresolvable:
        return SchemaProblem(
            reference.path,
            f"{short(reference.value)} points to nothing in this schema; define it (e.g. under "
            '"$defs") or correct the reference.',
        )
    if not isinstance(target, bool) and id(target) not in schemas:
        return SchemaProblem(
            reference.path,
            f"{short(reference.value)} points to a value that is not a schema of this "
            'document; refer to a schema, e.g. "#/$defs/<Name>".',
        )
    return target


# ---------------------------------------------------------------- a call's arguments


def arguments_problem(schema: object, arguments: object) -> SchemaProblem | None:
    """The first reason `arguments` fail the host tool's `schema`, or None.

    Validates against all of the schema (JSON Schema 2020-12: 3.0 is an integer, a bool is
    neither an integer nor a number, `pattern` searches), formats of CHECKED_FORMATS
    included. Paths start at `$`, the arguments object, and name the offending value
    (`$.address.zip`, `$.items[2]`); which problem comes first is schema_messages.first_problem.
    A stored schema the library cannot apply (written around the registration checks) fails
    every call with the schema's own problem rather than letting unchecked arguments through.
    """
    compiled = _compiled_or_problem(schema)
    if isinstance(compiled, SchemaProblem):
        return SchemaProblem(
            "$",
            f"cannot be checked: the tool's inputSchema is invalid at {compiled.path} "
            f"({compiled.message}); the operator must correct the tool.",
        )
    value: Any = arguments  # any JSON value; the validator's annotation names them
    try:
        return first_problem(compiled.iter_errors(value), in_schema=False)
    except RecursionError:  # a recursive schema follows arguments as deep as they go
        return SchemaProblem("$", _TOO_DEEP)


def cache_clear() -> None:
    """Forget every compiled validator (for measurements and tests)."""
    _compiled.cache_clear()
