"""Roles, kinds and derived types: each Literal type lists exactly its named constants."""

from __future__ import annotations

from typing import get_args

from contextproto.protocol import messages
from contextproto.protocol.messages import ROLE_OF_KIND, DerivedType, Kind, Role, ViewKind


def _constants(prefix: str) -> set[object]:
    return {value for name, value in vars(messages).items() if name.startswith(prefix)}


def test_each_literal_type_is_its_constants():
    roles = {v for n, v in vars(messages).items() if n.startswith("ROLE_") and n != "ROLE_OF_KIND"}
    assert set(get_args(Role)) == roles
    assert set(get_args(Kind)) == _constants("KIND_")
    assert set(get_args(DerivedType)) == _constants("DERIVED_")
    assert set(ROLE_OF_KIND) == set(get_args(Kind))
    assert set(ROLE_OF_KIND.values()) <= set(get_args(Role))


def test_a_view_kind_is_a_raw_kind_or_a_derived_message_kind():
    flat = set()
    for member in get_args(ViewKind):
        flat.update(get_args(member) or (member,))
    derived = set(get_args(DerivedType)) - {messages.DERIVED_RAW, messages.DERIVED_MASKED}
    assert flat == set(get_args(Kind)) | derived


def test_the_constants_are_plain_strings():
    # Rows, JSON and the hot path's comparisons see exactly these strings.
    for name in ("ROLE_USER", "KIND_TOOL_CALL", "DERIVED_STATE"):
        assert type(getattr(messages, name)) is str
