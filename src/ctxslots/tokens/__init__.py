"""Token counters: the protocol every counter follows, tiktoken offline, and other tokenizers.

- :class:`TokenCounterProtocol`: anything with ``count(text) -> int`` (and, when it
  has one, a ``name`` for reports) counts for the assembler.
- :class:`TokenCounter`: tiktoken's ``o200k_base`` or ``cl100k_base``, built offline.
- :class:`HuggingFaceCounter`: a HuggingFace ``tokenizer.json`` file, through the
  ``tokenizers`` package (the ``tokenizers`` extra), for Qwen, Llama, Mistral and
  other models whose counts differ from OpenAI's.
- :func:`counter_from_spec`: a counter from a command-line value (an encoding name
  or a ``tokenizer.json`` path).
"""

from __future__ import annotations

from ._tiktoken import (
    DEFAULT_ENCODING,
    ENCODINGS,
    TokenCounter,
    count_tokens,
    get_encoding,
    parse_ranks,
)
from .huggingface import HuggingFaceCounter
from .protocol import (
    TokenCounterProtocol,
    counter_from_spec,
    counter_name,
    exact_count,
    joined_count,
)

__all__ = [
    "DEFAULT_ENCODING",
    "ENCODINGS",
    "HuggingFaceCounter",
    "TokenCounter",
    "TokenCounterProtocol",
    "count_tokens",
    "counter_from_spec",
    "counter_name",
    "exact_count",
    "get_encoding",
    "joined_count",
    "parse_ranks",
]
