"""Two checks that hold a wire TypedDict to what it names.

`serializer_problems(serializer, shape)`: the DRF serializer that documents a reply for the
OpenAPI schema has the TypedDict's keys, no other, with the same required/optional split, the
same nullability and a field kind that fits each value's type (nested serializers against
nested TypedDicts, recursively).

`wire_problems(value, shape)`: a JSON value built by a `to_wire` (or sent by the API) has
the keys its TypedDict declares, every required one, and values of the declared types.
"""

from __future__ import annotations

import enum
import types
import typing
from typing import (
    Any,
    Literal,
    NotRequired,
    Required,
    Union,
    get_args,
    get_origin,
    get_type_hints,
    is_typeddict,
)

from rest_framework import serializers

from contextproto.api import AnyJSONField
from contextproto.api_schema import OPEN_COMPONENTS


def _hints(shape: Any) -> dict[str, Any]:
    return get_type_hints(shape)


def required_keys(shape: Any) -> set[str]:
    """The keys `shape` always has. Not `__required_keys__`: under `from __future__ import
    annotations` Python 3.12 cannot see `NotRequired[...]` in a string annotation and counts
    such a key as required, so the wrappers are read from the resolved hints here."""
    required = set(shape.__required_keys__)
    for key, tp in get_type_hints(shape, include_extras=True).items():
        if get_origin(tp) is NotRequired:
            required.discard(key)
        elif get_origin(tp) is Required:
            required.add(key)
    return required


def _members(tp: Any) -> list[Any]:
    """The members of a union (a type alias of one included), else [tp]."""
    if isinstance(tp, typing.TypeAliasType):
        return _members(tp.__value__)
    if get_origin(tp) in (Union, types.UnionType):
        return [m for arg in get_args(tp) for m in _members(arg)]
    return [tp]


def _is_free(tp: Any) -> bool:
    return tp is Any or tp is object


def _admits_none(tp: Any) -> bool:
    return any(m is type(None) for m in _members(tp))


def _without_none(tp: Any) -> list[Any]:
    return [m for m in _members(tp) if m is not type(None)]


# --------------------------------------------------------------------- serializer vs shape


def _keys(shapes: list[Any]) -> tuple[set[str], set[str], dict[str, list[Any]]]:
    """All keys of a union of TypedDicts, the keys every member requires, each key's types."""
    every: set[str] = set()
    required: set[str] | None = None
    types_of: dict[str, list[Any]] = {}
    for shape in shapes:
        hints = _hints(shape)
        every |= set(hints)
        required = required_keys(shape) if required is None else required & required_keys(shape)
        for key, tp in hints.items():
            types_of.setdefault(key, []).append(tp)
    return every, required or set(), types_of


def serializer_problems(serializer: Any, shape: Any, where: str = "") -> list[str]:
    """What differs between `serializer` (a class or an instance) and the TypedDict (or a
    union of TypedDicts) `shape`."""
    if isinstance(serializer, type):
        serializer = serializer()
    shapes = _without_none(shape)
    if not all(is_typeddict(s) for s in shapes):
        open_ = type(serializer).__name__ in OPEN_COMPONENTS
        if open_ and all(get_origin(s) is dict for s in shapes):
            return []  # an open object documented by its usual keys; the wire is any mapping
        return [f"{where or '.'}: {type(serializer).__name__} documents a {shape!r}"]
    every, required, types_of = _keys(shapes)
    fields = serializer.fields
    problems = []
    named = set(fields)
    if type(serializer).__name__ in OPEN_COMPONENTS:
        # Open: the named fields are those every instance may have; more may follow.
        missing: set[str] = set()
    else:
        missing = every - named
    if missing:
        problems.append(f"{where or '.'}: sent but not documented: {sorted(missing)}")
    if named - every:
        problems.append(f"{where or '.'}: documented but never sent: {sorted(named - every)}")
    for name in sorted(named & every):
        field = fields[name]
        tp = types_of[name][0] if len(types_of[name]) == 1 else Union[tuple(types_of[name])]  # noqa: UP007
        path = f"{where}.{name}"
        if field.required != (name in required):
            problems.append(
                f"{path}: required={field.required} but the shape's key is "
                + ("always there" if name in required else "sometimes absent")
            )
        problems += _field_problems(field, tp, path)
    return problems


_KINDS: list[tuple[type, tuple[Any, ...]]] = [
    (serializers.BooleanField, (bool,)),
    (serializers.IntegerField, (int,)),
    (serializers.FloatField, (float, int)),
    (serializers.DictField, (dict,)),
    (serializers.CharField, (str,)),
    (serializers.ChoiceField, (str,)),
    (serializers.UUIDField, (str,)),
    (serializers.DateTimeField, (str,)),
]


def _is_str(tp: Any) -> bool:
    if get_origin(tp) is Literal:
        return all(isinstance(v, str) for v in get_args(tp))
    return isinstance(tp, type) and issubclass(tp, str)


def _fits(tp: Any, kinds: tuple[Any, ...]) -> bool:
    if _is_free(tp):
        return True
    if str in kinds and _is_str(tp):
        return True
    if get_origin(tp) is Literal:
        return all(type(v) in kinds for v in get_args(tp))
    base = get_origin(tp) or tp
    if base is bool:
        return bool in kinds
    return isinstance(base, type) and issubclass(base, kinds)


def _named_values(values: list[Any]) -> set[Any]:
    """The values a Literal or an Enum type names; empty for an open type (str)."""
    named: set[Any] = set()
    for tp in values:
        if get_origin(tp) is Literal:
            named |= set(get_args(tp))
        elif isinstance(tp, type) and issubclass(tp, enum.Enum):
            named |= {m.value for m in tp}
        else:
            return set()
    return named


def _field_problems(field: Any, tp: Any, path: str) -> list[str]:
    if isinstance(field, AnyJSONField) and _is_free(tp):
        return []
    problems = []
    if not any(_is_free(m) for m in _members(tp)) and field.allow_null != _admits_none(tp):
        problems.append(
            f"{path}: allow_null={field.allow_null} but the shape's value "
            + ("may be null" if _admits_none(tp) else "is never null")
        )
    values = _without_none(tp)
    if isinstance(field, AnyJSONField):
        return problems
    if isinstance(field, serializers.ListSerializer):
        if any(get_origin(v) is not list for v in values):
            return [*problems, f"{path}: a list documented for {tp!r}"]
        return problems + serializer_problems(field.child, get_args(values[0])[0], path + "[]")
    if isinstance(field, serializers.Serializer):
        return problems + serializer_problems(field, tp, path)
    if isinstance(field, serializers.ListField):
        if any(get_origin(v) is not list for v in values):
            return [*problems, f"{path}: a list documented for {tp!r}"]
        (item,) = get_args(values[0])
        return problems + _field_problems(field.child, item, path + "[]")
    if isinstance(field, serializers.ChoiceField) and (named := _named_values(values)):
        if set(field.choices) != named:
            problems.append(f"{path}: choices {sorted(field.choices)} but sent {sorted(named)}")
    for kind, accepted in _KINDS:
        if isinstance(field, kind):
            if not all(_fits(v, accepted) for v in values):
                problems.append(f"{path}: {type(field).__name__} documented for {tp!r}")
            return problems
    return [*problems, f"{path}: no rule for {type(field).__name__}"]


# --------------------------------------------------------------------------- value vs shape


def wire_problems(value: Any, tp: Any, path: str = "") -> list[str]:
    """Where `value` departs from the type `tp` (a TypedDict, a container, a scalar)."""
    members = _members(tp)
    if len(members) > 1:
        found = [wire_problems(value, m, path) for m in members]
        if any(not f for f in found):
            return []
        # Tagged unions (tool results): report against the closest member.
        return min(found, key=len)
    if _is_free(tp):
        return []
    if tp is type(None):
        return [] if value is None else [f"{path or '.'}: {value!r} is not null"]
    if is_typeddict(tp):
        if not isinstance(value, dict):
            return [f"{path or '.'}: {type(value).__name__}, not an object ({tp.__name__})"]
        hints = _hints(tp)
        problems = []
        if extra := set(value) - set(hints):
            problems.append(f"{path or '.'}: keys not in {tp.__name__}: {sorted(extra)}")
        if absent := required_keys(tp) - set(value):
            problems.append(f"{path or '.'}: {tp.__name__} keys missing: {sorted(absent)}")
        for key in sorted(set(value) & set(hints)):
            problems += wire_problems(value[key], hints[key], f"{path}.{key}")
        return problems
    origin = get_origin(tp)
    if origin is Literal:
        return [] if value in get_args(tp) else [f"{path}: {value!r} not in {get_args(tp)}"]
    if origin is list:
        if not isinstance(value, list):
            return [f"{path}: {type(value).__name__}, not a list"]
        (item,) = get_args(tp)
        return [p for i, v in enumerate(value) for p in wire_problems(v, item, f"{path}[{i}]")]
    if origin is dict:
        if not isinstance(value, dict):
            return [f"{path}: {type(value).__name__}, not an object"]
        _key, item = get_args(tp)
        problems = [f"{path}: key {k!r} not a string" for k in value if not isinstance(k, str)]
        return problems + [
            p for k, v in value.items() for p in wire_problems(v, item, f"{path}.{k}")
        ]
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        ok = value in {m.value for m in tp}
    elif tp is float:
        ok = isinstance(value, int | float) and not isinstance(value, bool)
    elif tp is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
    else:
        ok = isinstance(value, origin or tp)
    return [] if ok else [f"{path or '.'}: {value!r} is not {tp!r}"]
