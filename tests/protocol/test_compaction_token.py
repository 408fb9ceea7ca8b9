"""The compaction token (contract §21): it names a session and a point of its log, for one
Application, and nothing else reads as one."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from contextproto.errors import ERRORS
from contextproto.protocol.gateway.compaction import (
    CompactionTokenInvalid,
    read_compaction,
    sign_compaction,
)

KEY = b"k" * 32
APP = "0b7f3c1e-1111-4a2b-9c3d-5e6f7a8b9c0d"
SESSION = "3e2d1c0b-2222-4a2b-9c3d-5e6f7a8b9c0d"


@given(st.text(min_size=1, max_size=40), st.integers(0, 2**40))
def test_a_token_reads_back_the_session_and_bound_it_was_signed_for(session, through) -> None:
    token = sign_compaction(KEY, APP, session, through)
    assert read_compaction(KEY, token, APP) == (session, through)
    # Opaque and URL-safe: no padding, no characters a client would have to escape.
    assert re.fullmatch(r"[A-Za-z0-9_.-]+", token)


def test_another_applications_token_is_refused() -> None:
    token = sign_compaction(KEY, APP, SESSION, 12)
    with pytest.raises(CompactionTokenInvalid) as refused:
        read_compaction(KEY, token, "another-application")
    assert refused.value.code == "invalid_compaction_item"
    with pytest.raises(CompactionTokenInvalid):
        read_compaction(b"another key", token, APP)


@pytest.mark.parametrize("position", range(5, 60, 7))
def test_a_token_altered_anywhere_is_refused(position: int) -> None:
    token = sign_compaction(KEY, APP, SESSION, 12)
    flipped = "A" if token[position] != "A" else "B"
    altered = token[:position] + flipped + token[position + 1 :]
    with pytest.raises(CompactionTokenInvalid):
        read_compaction(KEY, altered, APP)


@pytest.mark.parametrize(
    "token", ["", "cpx1.", "cpx1.abc", "cpx1..", "gAAAAB-openai-item", None, 42, "cpx1.e30.AAAA"]
)
def test_what_this_service_did_not_sign_is_refused(token: object) -> None:
    with pytest.raises(CompactionTokenInvalid) as refused:
        read_compaction(KEY, token, APP)
    assert refused.value.details["reason"]


def test_the_refusal_is_a_registered_400() -> None:
    assert ERRORS["invalid_compaction_item"].status == 400
    assert ERRORS["previous_response_not_found"].status == 404
    assert ERRORS["response_not_found"].status == 404
