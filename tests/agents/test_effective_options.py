"""`effective_options`: the protocol's defaults overlaid by the version's options."""

from __future__ import annotations

import pytest

from agents.models import AgentVersion
from agents.selectors import effective_options, protocol_of
from contextproto.protocol import catalog
from contextproto.protocol.errors import ProtocolError


def version(protocol: str = "unified", number: int = 2, options=None) -> AgentVersion:
    # Not saved: both helpers read only the protocol fields and the options.
    return AgentVersion(
        context_protocol_id=protocol, context_protocol_version=number, options=options
    )


def test_protocol_of_is_the_catalog_entry_of_the_version():
    assert protocol_of(version()) is catalog.get_version("unified", 2)


def test_protocol_of_an_unknown_version_is_protocol_unknown():
    with pytest.raises(ProtocolError) as refused:
        protocol_of(version(number=99))
    assert refused.value.code == "protocol_unknown"


@pytest.mark.parametrize("options", [None, {}])
def test_without_options_the_defaults_apply(options):
    assert effective_options(version(options=options)) == catalog.get_version("unified", 2).defaults


def test_the_version_options_override_the_defaults_and_fill_nothing_else():
    defaults = catalog.get_version("unified", 2).defaults
    options = effective_options(version(options={"pageSize": 10}))
    assert options == {**defaults, "pageSize": 10}
    assert options is not defaults and defaults["pageSize"] != 10


def test_a_protocol_looked_up_already_is_used_as_given():
    prefix = catalog.get_version("prefix", 2)
    assert effective_options(version(), prefix) == prefix.defaults
