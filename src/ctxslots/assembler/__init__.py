"""The PromptAssembler: sections from contributors, fitted to a token budget.

Token counting (:mod:`.tokens`), rendering (:mod:`.render`, :mod:`.escape`),
budget fitting (:mod:`.fit`) and dumps (:mod:`.dump`) each live in their own
module.
"""

from __future__ import annotations

from .assembler import PromptAssembler
from .dump import DUMP_FORMATS, DUMP_SCHEMA_VERSION, dump_prompt, prompt_to_dict
from .errors import EncodingError, InvalidRequestError
from .escape import bullet
from .render import SECTION_SEPARATOR, make_environment
from .request import DEFAULT_BUDGET, AssemblyRequest, ContextBlock
from .tokens import (
    DEFAULT_ENCODING,
    ENCODINGS,
    TokenCounter,
    count_tokens,
    get_encoding,
)

__all__ = [
    "DEFAULT_BUDGET",
    "DEFAULT_ENCODING",
    "DUMP_FORMATS",
    "DUMP_SCHEMA_VERSION",
    "ENCODINGS",
    "SECTION_SEPARATOR",
    "AssemblyRequest",
    "ContextBlock",
    "EncodingError",
    "InvalidRequestError",
    "PromptAssembler",
    "TokenCounter",
    "bullet",
    "count_tokens",
    "dump_prompt",
    "get_encoding",
    "make_environment",
    "prompt_to_dict",
]
